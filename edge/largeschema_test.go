package edge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
)

// strictBody is a JSON object of exactly n bytes: a string blob, then fields.
func strictBody(t testing.TB, n int, fields string) []byte {
	t.Helper()
	frame := len(`{"blob":"",}`) + len(fields)
	if n < frame {
		t.Fatalf("a body of %d bytes cannot hold %s", n, fields)
	}
	return []byte(`{"blob":"` + strings.Repeat("x", n-frame) + `",` + fields + `}`)
}

// TestLargeBodySchemaChecked: a body past one message, streamed into the payloads
// bucket without the edge holding it whole, is checked against the method's input
// schema all the same, by the SDK before the handler runs. At the threshold's edge (a
// body of exactly the threshold, which the edge checks itself, and one byte more,
// which the SDK checks), an invalid body gets the same answer: 400 invalid_params
// with the same violations; the handler runs for neither, and runs for a valid one.
func TestLargeBodySchemaChecked(t *testing.T) {
	e := newEnv(t)
	var ran atomic.Int64
	w := workers.New(testenv.Conn(t, e.nc.ConnectedUrl()), workers.Tool{ID: "strict", Version: "1.0.0", Description: "Takes a blob and a count."},
		workers.WithLogger(testenv.Logger(t)))
	w.Handle(workers.Method{
		Name: "take", Description: "Counts the calls it runs.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"blob":{"type":"string"},"n":{"type":"integer","minimum":1}},"required":["n"]}`),
		Handler: func(context.Context, *workers.Call) (any, error) {
			ran.Add(1)
			return map[string]bool{"ok": true}, nil
		},
	})
	e.runWorker(t, w, "strict", make(chan struct{}))
	key := e.account("acme", registry.Limits{})
	e.connect("acme", "strict")
	threshold := int(wire.PayloadThreshold(e.nc.MaxPayload()))

	type answer struct {
		Error struct {
			Code    string
			Details json.RawMessage
		}
	}
	var first *answer
	for _, size := range []int{threshold, threshold + 1} {
		for _, bad := range []string{`"n":"seven"`, `"n":0`, `"m":1`} {
			status, _, _, short := e.post(t, key, "/tool-call/strict/take", strictBody(t, size, bad), false)
			var got answer
			if err := json.Unmarshal(short, &got); err != nil || status != http.StatusBadRequest || got.Error.Code != "invalid_params" {
				t.Fatalf("%d bytes, %s: %d %.300s", size, bad, status, short)
			}
			if bad == `"n":"seven"` {
				if first == nil {
					first = &got
				} else if string(got.Error.Details) != string(first.Error.Details) {
					t.Errorf("past the threshold the violations are %s, at it %s", got.Error.Details, first.Error.Details)
				}
			}
		}
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("the handler ran %d times for invalid bodies", n)
	}
	for _, size := range []int{threshold, threshold + 1} {
		if status, _, _, short := e.post(t, key, "/tool-call/strict/take", strictBody(t, size, `"n":7`), false); status != http.StatusOK {
			t.Fatalf("a valid body of %d bytes: %d %.300s", size, status, short)
		}
	}
	if n := ran.Load(); n != 2 {
		t.Fatalf("the handler ran %d times for 2 valid bodies", n)
	}
	e.noObjectsLeft(t)
}
