package edge_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/registry"
)

// TestParametersAreValidated: each way a body can miss the method's schema comes back
// as invalid_params with the JSON pointer of the field at fault.
func TestParametersAreValidated(t *testing.T) {
	e := newEnv(t)
	key := e.account("acme", registry.Limits{})
	e.serve(emailTool, echo)
	e.connect("acme", "email")

	for _, tc := range []struct {
		name, body string
		want       []registry.Violation
	}{
		{"a missing field is named", `{"to":"ada@example.com","subject":"hi"}`,
			[]registry.Violation{{Pointer: "/body", Message: "required field is missing"}}},
		{"a field of the wrong type is named", `{"to":"ada@example.com","subject":42,"body":"hello"}`,
			[]registry.Violation{{Pointer: "/subject"}}},
		{"an unknown field is refused", `{"to":"ada@example.com","subject":"hi","body":"hello","cc":"bob@example.com"}`,
			[]registry.Violation{{Pointer: "/cc", Message: "field is not allowed"}}},
		{"a malformed e-mail is refused", `{"to":"not an address","subject":"hi","body":"hello"}`,
			[]registry.Violation{{Pointer: "/to"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := e.call(key, "email", "send_email", tc.body).expect(t, http.StatusBadRequest, edge.CodeInvalidParams)
			var vs []registry.Violation
			b, _ := json.Marshal(got.Details)
			if err := json.Unmarshal(b, &vs); err != nil {
				t.Fatal(err)
			}
			if len(vs) != len(tc.want) {
				t.Fatalf("details %+v, want %+v", vs, tc.want)
			}
			for i, w := range tc.want {
				if vs[i].Pointer != w.Pointer || vs[i].Message == "" || (w.Message != "" && vs[i].Message != w.Message) {
					t.Fatalf("detail %d: %+v, want %+v", i, vs[i], w)
				}
			}
		})
	}
	if r := e.call(key, "email", "send_email", goodEmail); r.status != http.StatusOK {
		t.Fatalf("valid parameters: status %d; %s", r.status, r.body)
	}
}

// TestBodyLimit: a call's body of exactly the limit is taken, one byte more is a 413,
// whether the length is declared or not, and the 413 reaches a client still sending.
func TestBodyLimit(t *testing.T) {
	const limit = 64 << 10
	e := newEnv(t, withPayloadLimit(limit))
	key := e.account("acme", registry.Limits{})
	e.serve(echoTool, func(_ string, m *nats.Msg) { respond(m, 0, "text/plain", []byte(itoa(len(m.Data)))) })
	e.connect("acme", "echo")
	if e.edge.MaxPayloadBytes() != limit {
		t.Fatalf("MaxPayloadBytes %d, want the configured %d", e.edge.MaxPayloadBytes(), limit)
	}

	body := func(n int) string {
		const frame = `{"pad":""}`
		return `{"pad":"` + strings.Repeat("x", n-len(frame)) + `"}`
	}
	if r := e.call(key, "echo", "echo", body(limit)); r.status != http.StatusOK || string(r.body) != itoa(limit) {
		t.Fatalf("body of exactly %d bytes: status %d, tool saw %s bytes", limit, r.status, r.body)
	}
	e.call(key, "echo", "echo", body(limit+1)).expect(t, http.StatusRequestEntityTooLarge, edge.CodePayloadTooLarge)

	// Chunked: no Content-Length to refuse early; the reader stops at the limit.
	chunked := func(n int) result {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/tool-call/echo/echo", struct{ *strings.Reader }{strings.NewReader(body(n))})
		req.Header.Set("SERVICE_API_KEY", key)
		req.Header.Set("Content-Type", "application/json")
		if req.ContentLength != 0 {
			t.Fatal("the request would declare its length")
		}
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		return result{status: resp.StatusCode, header: resp.Header, body: buf.Bytes()}
	}
	if r := chunked(limit); r.status != http.StatusOK {
		t.Fatalf("chunked body of exactly the limit: status %d; %s", r.status, r.body)
	}
	chunked(limit+1).expect(t, http.StatusRequestEntityTooLarge, edge.CodePayloadTooLarge)

	// A client that goes on sending a body well past the limit still gets the 413.
	// The edge stops reading at the limit (or reads none of a body declared too
	// large), answers, closes its side and waits before it closes the connection.
	// Closing at once, with the rest of the body unread, sent a reset that reached
	// the client while it was still writing, and Go's client, among others, then
	// reports the broken write, not the answer.
	for i := range 40 {
		// Half with no length declared: the edge learns the body is too large only by
		// reading it. Half declared, refused before any of it is read: under 256 KiB,
		// so that net/http, left to itself, would not hold the connection for it.
		var body io.Reader = struct{ io.Reader }{strings.NewReader(`{"pad":"` + strings.Repeat("x", limit+(1<<20)) + `"}`)}
		if i%2 == 1 {
			body = strings.NewReader(`{"pad":"` + strings.Repeat("x", limit+(128<<10)) + `"}`)
		}
		req, _ := http.NewRequest(http.MethodPost, e.url+"/tool-call/echo/echo", body)
		req.Header.Set("SERVICE_API_KEY", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatalf("request %d: no answer to a body past the limit: %v", i, err)
		}
		var env edge.Envelope
		decodeErr := json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || decodeErr != nil || env.Error.Code != edge.CodePayloadTooLarge {
			t.Fatalf("request %d: %d %+v (%v), want 413 %s", i, resp.StatusCode, env, decodeErr, edge.CodePayloadTooLarge)
		}
	}
}

// TestBodyLimitFitsMaxPayload: the limit never exceeds what the NATS server takes in
// one message, keeping room for the call's headers.
func TestBodyLimitFitsMaxPayload(t *testing.T) {
	const maxPayload = 32 << 10
	e := newEnv(t, withServer(func(c *bus.ServerConfig) { c.MaxPayload = maxPayload }))
	if got, want := e.edge.MaxBodyBytes(), int64(maxPayload-edge.HeaderRoom); got != want {
		t.Fatalf("MaxBodyBytes %d, want %d (max_payload less the header room)", got, want)
	}
	key := e.account("acme", registry.Limits{})
	e.serve(echoTool, echo)
	e.connect("acme", "echo")
	at := `{"pad":"` + strings.Repeat("x", int(e.edge.MaxBodyBytes())-len(`{"pad":""}`)) + `"}`
	if r := e.call(key, "echo", "echo", at, "X-Request-Id", strings.Repeat("r", 64)); r.status != http.StatusOK {
		t.Fatalf("a body at the lowered limit must still fit a NATS message: status %d; %s", r.status, r.body)
	}
}

// TestToolAnswersReachTheCallerVerbatim: the tool's status, content type and bytes are
// the answer, JSON or not.
func TestToolAnswersReachTheCallerVerbatim(t *testing.T) {
	e := newEnv(t)
	key := e.account("acme", registry.Limits{})
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\xff\xfe")
	answers := map[string]struct {
		status int
		ctype  string
		body   []byte
	}{
		"created":  {http.StatusCreated, "application/json", []byte(`{"id": "m1",  "queued":true}`)},
		"teapot":   {http.StatusTeapot, "text/plain; charset=utf-8", []byte("I'm a teapot\n")},
		"image":    {0, "image/png", png},
		"html":     {0, "text/html", []byte("<b>not a page of the gateway</b>")},
		"untyped":  {0, "", []byte("raw bytes, no type")},
		"declined": {http.StatusUnprocessableEntity, "application/problem+json", []byte(`{"title":"no"}`)},
	}
	var methods []registry.Method
	for name := range answers {
		methods = append(methods, registry.Method{Name: name})
	}
	e.serve(registry.Tool{ID: "shapes", Methods: methods}, func(method string, m *nats.Msg) {
		a := answers[method]
		respond(m, a.status, a.ctype, a.body)
	})
	e.connect("acme", "shapes")

	for name, a := range answers {
		t.Run(name, func(t *testing.T) {
			for _, path := range []string{"/tool-call/shapes/" + name, "/tools/shapes/" + name} {
				r := e.do(http.MethodPost, path, `{}`, "SERVICE_API_KEY", key)
				want := a.status
				if want == 0 {
					want = http.StatusOK
				}
				if r.status != want {
					t.Fatalf("%s: status %d, want %d", path, r.status, want)
				}
				if got := r.header.Get("Content-Type"); got != a.ctype {
					t.Fatalf("%s: Content-Type %q, want %q", path, got, a.ctype)
				}
				if !bytes.Equal(r.body, a.body) {
					t.Fatalf("%s: body %q, want %q", path, r.body, a.body)
				}
				if r.header.Get("X-Content-Type-Options") != "nosniff" {
					t.Fatalf("%s: a tool's bytes must not be sniffed into a page", path)
				}
			}
		})
	}
}

// TestRequestID: a sane X-Request-Id is kept and reaches the tool; anything else is
// replaced by a fresh one.
func TestRequestID(t *testing.T) {
	e := newEnv(t)
	key := e.account("acme", registry.Limits{})
	seen := make(chan nats.Header, 4)
	e.serve(echoTool, func(_ string, m *nats.Msg) {
		seen <- m.Header
		respond(m, 0, "application/json", []byte(`{}`))
	})
	e.connect("acme", "echo")

	r := e.call(key, "echo", "echo", `{}`, "X-Request-Id", "client-42_a")
	if got := r.header.Get("X-Request-Id"); got != "client-42_a" {
		t.Fatalf("X-Request-Id %q, want the caller's", got)
	}
	h := <-seen
	if h.Get(wire.HeaderRequestID) != "client-42_a" || h.Get(wire.HeaderAccount) != "acme" || h.Get(wire.HeaderDeadline) == "" {
		t.Fatalf("the tool saw request id %q, account %q, deadline %q", h.Get(wire.HeaderRequestID), h.Get(wire.HeaderAccount), h.Get(wire.HeaderDeadline))
	}
	for _, bad := range []string{"has.dots", "a*b", strings.Repeat("x", 65), "spa ce"} {
		r := e.call(key, "echo", "echo", `{}`, "X-Request-Id", bad)
		got := r.header.Get("X-Request-Id")
		if got == bad || !strings.HasPrefix(got, "req_") {
			t.Fatalf("X-Request-Id %q came back as %q, want a fresh id", bad, got)
		}
		if h := <-seen; h.Get(wire.HeaderRequestID) != got {
			t.Fatalf("the tool saw %q, the caller %q", h.Get(wire.HeaderRequestID), got)
		}
	}
	got := e.call(key, "nope", "x", `{}`, "X-Request-Id", "trace-me").envelope(t)
	if got.RequestID != "trace-me" {
		t.Fatalf("envelope request_id %q, want trace-me", got.RequestID)
	}
}

// TestContentTypes: application/json with parameters, and no Content-Type at all, are
// JSON; an empty body is an empty object.
func TestContentTypes(t *testing.T) {
	e := newEnv(t)
	key := e.account("acme", registry.Limits{})
	e.serve(echoTool, echo)
	e.connect("acme", "echo")
	for _, ct := range []string{"application/json; charset=utf-8", "Application/JSON", ""} {
		r := e.call(key, "echo", "echo", `{"a":1}`, "Content-Type", ct)
		if r.status != http.StatusOK || string(r.body) != `{"a":1}` {
			t.Fatalf("Content-Type %q: status %d, body %s", ct, r.status, r.body)
		}
	}
	r := e.do(http.MethodPost, "/tool-call/echo/echo", "", "SERVICE_API_KEY", key)
	if r.status != http.StatusOK || string(r.body) != `{}` {
		t.Fatalf("no body: status %d, body %s; want the tool to get {}", r.status, r.body)
	}
	r = e.do(http.MethodPost, "/tool-call/echo/echo", `{"b":2}`, "Authorization", "Bearer "+key)
	if r.status != http.StatusOK {
		t.Fatalf("Authorization: Bearer: status %d; %s", r.status, r.body)
	}
}

// TestServerTimingSplitsToolFromGateway: a tool's answer, a result or an error of its
// own, says in Server-Timing how long the bus round trip took (the tool's time) and
// how long the edge took besides.
func TestServerTimingSplitsToolFromGateway(t *testing.T) {
	e := newEnv(t)
	key := e.account("acme", registry.Limits{})
	const toolTime = 120 * time.Millisecond
	e.serve(registry.Tool{ID: "slow", Methods: []registry.Method{{Name: "run"}, {Name: "fail"}}}, func(method string, m *nats.Msg) {
		time.Sleep(toolTime)
		if method == "fail" {
			respondError(m, "out_of_paper", "the printer is out of paper")
			return
		}
		respond(m, 0, "application/json", []byte(`{}`))
	})
	e.connect("acme", "slow")

	for _, method := range []string{"run", "fail"} {
		start := time.Now()
		r := e.call(key, "slow", method, `{}`)
		took := time.Since(start)
		if method == "fail" {
			r.expect(t, http.StatusBadGateway, edge.CodeToolError)
		} else if r.status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", method, r.status, r.body)
		}
		timing := map[string]time.Duration{}
		for _, metric := range strings.Split(r.header.Get("Server-Timing"), ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(metric), ";")
			ms, ok := strings.CutPrefix(params, "dur=")
			f, err := strconv.ParseFloat(ms, 64)
			if !ok || err != nil {
				t.Fatalf("%s: Server-Timing %q: metric %q has no dur", method, r.header.Get("Server-Timing"), metric)
			}
			timing[name] = time.Duration(f * float64(time.Millisecond))
		}
		tool, gw := timing["tool"], timing["gateway"]
		if tool < toolTime || tool > took {
			t.Fatalf("%s: tool;dur %v: want at least the tool's %v and at most the %v the call took", method, tool, toolTime, took)
		}
		if _, ok := timing["gateway"]; !ok || gw < 0 || gw+tool > took {
			t.Fatalf("%s: gateway;dur %v with tool;dur %v: want both within the %v the call took", method, gw, tool, took)
		}
	}

	m := e.do(http.MethodGet, "/metrics", "")
	for _, want := range []string{
		`toolgate_tool_duration_seconds_count{method="run",tool="slow"} 1`,
		`toolgate_tool_duration_seconds_count{method="fail",tool="slow"} 1`,
		`toolgate_tool_duration_seconds_bucket{method="run",tool="slow",le="0.1"} 0`,
		`toolgate_tool_duration_seconds_bucket{method="run",tool="slow",le="+Inf"} 1`,
	} {
		if !strings.Contains(string(m.body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
