package edge_test

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/registry"
)

// counterTool takes whole numbers and answers as a tool written in Go does: it
// decodes its parameters into typed fields, and fails on anything else.
var counterTool = registry.Tool{ID: "counter", Methods: []registry.Method{{Name: "add",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"},"by":{"type":"integer"},
		"scale":{"type":"number"},"label":{"type":"string"}},"required":["n"]}`)}}}

func addInGo(_ string, m *nats.Msg) {
	var p struct {
		N, By int64
		Scale float64
		Label string
	}
	if err := json.Unmarshal(m.Data, &p); err != nil {
		respondError(m, "bad_params", err.Error())
		return
	}
	respond(m, 0, "application/json", m.Data)
}

// TestBadInputIsRefusedAndNumbersReachToolsWhole: a body with bytes that are not
// UTF-8 inside a string is not JSON, and never reaches the tool; whole numbers written
// with a fraction or an exponent pass an integer field and reach the tool in their
// integer form, which a typed decoder takes; other numbers and strings reach it as sent.
func TestBadInputIsRefusedAndNumbersReachToolsWhole(t *testing.T) {
	e := newEnv(t)
	key := e.account("acme", registry.Limits{})
	var calls atomic.Int64
	e.serve(counterTool, func(method string, m *nats.Msg) { calls.Add(1); addInGo(method, m) })
	e.connect("acme", "counter")

	t.Run("invalid UTF-8 inside a string is invalid_json", func(t *testing.T) {
		for _, body := range []string{
			"{\"n\":1,\"label\":\"\xff\"}",
			"{\"n\":1,\"label\":\"caf\xc3\"}",      // a sequence cut short
			"{\"n\":1,\"label\":\"\xed\xa0\x80\"}", // a surrogate, encoded
			"{\"n\":1,\"\xc0\xaf\":2}",             // an overlong encoding, in a key
		} {
			e.call(key, "counter", "add", body).expect(t, http.StatusBadRequest, edge.CodeInvalidJSON)
		}
		if n := calls.Load(); n != 0 {
			t.Fatalf("the tool was called %d times with bodies that are not JSON", n)
		}
	})

	t.Run("whole numbers reach the tool as integers", func(t *testing.T) {
		for _, tc := range []struct{ body, want string }{
			{`{"n":1.0}`, `{"n":1}`},
			{`{"n":5e2,"by":-2.50e1}`, `{"n":500,"by":-25}`},
			{`{"n":1,"scale":2.0}`, `{"n":1,"scale":2}`},
			{`{"n":3,"scale":0.5,"label":"1.0"}`, `{"n":3,"scale":0.5,"label":"1.0"}`},
		} {
			r := e.call(key, "counter", "add", tc.body)
			if r.status != http.StatusOK || string(r.body) != tc.want {
				t.Fatalf("%s: status %d, the tool got %s; want 200 and %s", tc.body, r.status, r.body, tc.want)
			}
		}
	})

	t.Run("a number that is not whole is still refused by an integer field", func(t *testing.T) {
		e.call(key, "counter", "add", `{"n":1.5}`).expect(t, http.StatusBadRequest, edge.CodeInvalidParams)
	})
}
