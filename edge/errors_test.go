package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// TestErrorTable walks DESIGN.md's error table: one case per code, each asserting the
// status and the envelope's code (and Retry-After where due).
func TestErrorTable(t *testing.T) {
	e := newEnv(t, withPayloadLimit(2<<20))
	key := e.account("acme", registry.Limits{})
	e.serve(emailTool, func(_ string, m *nats.Msg) { respond(m, 0, "application/json", []byte(`{"id":"m1"}`)) })
	e.connect("acme", "email")

	t.Run("invalid_json: a body that is not a JSON object is a 400", func(t *testing.T) {
		for _, body := range []string{`[1,2]`, `{"to":`, `"text"`} {
			e.call(key, "email", "send_email", body).expect(t, http.StatusBadRequest, edge.CodeInvalidJSON)
		}
	})
	t.Run("invalid_params: parameters against the schema are a 400 with details", func(t *testing.T) {
		got := e.call(key, "email", "send_email", `{"to":"ada@example.com"}`).expect(t, http.StatusBadRequest, edge.CodeInvalidParams)
		if len(got.Details) != 2 {
			t.Fatalf("details %v: want one per missing field", got.Details)
		}
	})
	t.Run("unauthenticated: no key, an unknown key, a key in the query string are a 401", func(t *testing.T) {
		r := e.do(http.MethodPost, "/tool-call/email/send_email", goodEmail)
		r.expect(t, http.StatusUnauthorized, edge.CodeUnauthenticated)
		if r.header.Get("WWW-Authenticate") == "" {
			t.Error("401 without WWW-Authenticate")
		}
		e.call(registry.NewKey(), "email", "send_email", goodEmail).expect(t, http.StatusUnauthorized, edge.CodeUnauthenticated)
		e.do(http.MethodPost, "/tool-call/email/send_email?SERVICE_API_KEY="+key+"&api_key="+key, goodEmail).
			expect(t, http.StatusUnauthorized, edge.CodeUnauthenticated)
		e.do(http.MethodGet, "/get-tools", "", "Authorization", "Basic "+key).expect(t, http.StatusUnauthorized, edge.CodeUnauthenticated)
	})
	t.Run("forbidden: a key scoped to other tools is a 403", func(t *testing.T) {
		scoped := e.key("acme", []string{"calendar"})
		e.call(scoped, "email", "send_email", goodEmail).expect(t, http.StatusForbidden, edge.CodeForbidden)
	})
	t.Run("tool_not_found: a tool that does not exist is a 404", func(t *testing.T) {
		e.call(key, "nope", "send_email", goodEmail).expect(t, http.StatusNotFound, edge.CodeToolNotFound)
	})
	t.Run("method_not_found: a method the tool lacks is a 404", func(t *testing.T) {
		e.call(key, "email", "unsend", goodEmail).expect(t, http.StatusNotFound, edge.CodeMethodNotFound)
	})
	t.Run("payload_too_large: a body over the limit is a 413", func(t *testing.T) {
		big := `{"to":"ada@example.com","subject":"hi","body":"` + strings.Repeat("x", int(e.edge.MaxPayloadBytes())) + `"}`
		e.call(key, "email", "send_email", big).expect(t, http.StatusRequestEntityTooLarge, edge.CodePayloadTooLarge)
	})
	t.Run("unsupported_media_type: a body that is not declared JSON is a 415", func(t *testing.T) {
		for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/jsonp", "multipart/form-data; boundary=x"} {
			e.call(key, "email", "send_email", goodEmail, "Content-Type", ct).expect(t, http.StatusUnsupportedMediaType, edge.CodeUnsupportedMediaType)
		}
	})
	t.Run("rate_limited: a key over its account's rate is a 429 with Retry-After", func(t *testing.T) {
		slow := e.accountKey("slow", registry.Limits{Rate: 0.5, Burst: 1}, nil)
		e.connect("slow", "email")
		if r := e.call(slow, "email", "send_email", goodEmail); r.status != http.StatusOK {
			t.Fatalf("first call: status %d, want 200; %s", r.status, r.body)
		}
		r := e.call(slow, "email", "send_email", goodEmail)
		r.expect(t, http.StatusTooManyRequests, edge.CodeRateLimited)
		if ra := r.header.Get("Retry-After"); ra != "2" {
			t.Fatalf("Retry-After %q, want 2 (seconds, rounded up, at 0.5 calls/s)", ra)
		}
	})
	t.Run("tool_error: a tool's own error is a 502 with its code and message", func(t *testing.T) {
		failing := registry.Tool{ID: "failing", Methods: []registry.Method{{Name: "run"}}}
		e.serve(failing, func(_ string, m *nats.Msg) { respondError(m, "quota_exceeded", "the mailbox is full") })
		e.connect("acme", "failing")
		got := e.call(key, "failing", "run", `{}`).expect(t, http.StatusBadGateway, edge.CodeToolError)
		want := []any{map[string]any{"code": "quota_exceeded", "message": "the mailbox is full"}}
		if !jsonEqual(got.Details, want) {
			t.Fatalf("details %v, want %v", got.Details, want)
		}
	})
	t.Run("tool_error: a tool's error keeps the status it asks for and the JSON it sends", func(t *testing.T) {
		picky := registry.Tool{ID: "picky", Methods: []registry.Method{{Name: "run"}}}
		e.serve(picky, func(_ string, m *nats.Msg) {
			r := nats.NewMsg(m.Reply)
			r.Header.Set(wire.HeaderErrorCode, "conflict")
			r.Header.Set(wire.HeaderError, "the slot is taken")
			r.Header.Set(wire.HeaderStatus, "409")
			r.Header.Set(wire.HeaderContentType, "application/json")
			r.Data = []byte(`{"slot":"10:00"}`)
			_ = m.RespondMsg(r)
		})
		e.connect("acme", "picky")
		got := e.call(key, "picky", "run", `{}`).expect(t, http.StatusConflict, edge.CodeToolError)
		want := []any{map[string]any{"code": "conflict", "message": "the slot is taken", "data": map[string]any{"slot": "10:00"}}}
		if !jsonEqual(got.Details, want) {
			t.Fatalf("details %v, want %v", got.Details, want)
		}
	})
	t.Run("tool_unavailable: a tool with no worker is a 503 with Retry-After", func(t *testing.T) {
		e.deploy(registry.Tool{ID: "asleep", Methods: []registry.Method{{Name: "run"}}})
		e.connect("acme", "asleep")
		r := e.call(key, "asleep", "run", `{}`)
		r.expect(t, http.StatusServiceUnavailable, edge.CodeToolUnavailable)
		if r.header.Get("Retry-After") == "" {
			t.Fatal("503 without Retry-After")
		}
	})
	t.Run("tool_timeout: a tool slower than the caller's deadline is a 504", func(t *testing.T) {
		slow := registry.Tool{ID: "slow", Methods: []registry.Method{{Name: "run"}}}
		e.serve(slow, func(_ string, m *nats.Msg) {
			time.Sleep(2 * time.Second)
			respond(m, 0, "application/json", []byte(`{}`))
		})
		e.connect("acme", "slow")
		start := time.Now()
		e.call(key, "slow", "run", `{}`, "Tg-Timeout", "200ms").expect(t, http.StatusGatewayTimeout, edge.CodeToolTimeout)
		// The figure is reported; only an answer no sooner than the tool's own fails.
		took := time.Since(start)
		t.Logf("a 200ms deadline answered after %v", took.Round(time.Millisecond))
		if took >= 2*time.Second {
			t.Fatalf("answered after %v, when the tool answers: the 200ms deadline was not kept", took)
		}
	})
}

// TestMethodTimeoutBoundsTheCall: without a Tg-Timeout the method's own timeout applies.
func TestMethodTimeoutBoundsTheCall(t *testing.T) {
	e := newEnv(t)
	key := e.account("acme", registry.Limits{})
	tool := registry.Tool{ID: "slow", Methods: []registry.Method{{Name: "run", Timeout: registry.Duration(150 * time.Millisecond)}}}
	e.serve(tool, func(_ string, m *nats.Msg) {
		time.Sleep(2 * time.Second)
		respond(m, 0, "", nil)
	})
	e.connect("acme", "slow")
	start := time.Now()
	e.call(key, "slow", "run", `{}`, "Tg-Timeout", "10s").expect(t, http.StatusGatewayTimeout, edge.CodeToolTimeout)
	// The figure is reported; only an answer no sooner than the tool's own fails.
	took := time.Since(start)
	t.Logf("a method timeout of 150ms answered after %v", took.Round(time.Millisecond))
	if took >= 2*time.Second {
		t.Fatalf("answered after %v, when the tool answers: the method's 150ms timeout was not kept", took)
	}
	for _, bad := range []string{"soon", "-1s", "0"} {
		e.call(key, "slow", "run", `{}`, "Tg-Timeout", bad).expect(t, http.StatusBadRequest, edge.CodeInvalidRequest)
	}
}

// TestUnknownRoutesAnswerInTheEnvelope: 404 and 405 come in the same envelope.
func TestUnknownRoutesAnswerInTheEnvelope(t *testing.T) {
	e := newEnv(t)
	e.do(http.MethodGet, "/nothing/here", "").expect(t, http.StatusNotFound, edge.CodeNotFound)
	e.do(http.MethodGet, "/mcp/tgl_whatever/sse", "").expect(t, http.StatusNotFound, edge.CodeNotFound)
	r := e.do(http.MethodDelete, "/get-tools", "")
	r.expect(t, http.StatusMethodNotAllowed, edge.CodeMethodNotAllowed)
	if r.header.Get("Allow") != "GET" {
		t.Fatalf("Allow %q, want GET", r.header.Get("Allow"))
	}
}

// TestToolNotOnTheAccountLooksMissing: a tool that exists but is not connected to the
// caller's account gets the very answer a tool that does not exist gets, on every route
// that names a tool, so a caller cannot learn which tools other accounts have.
func TestToolNotOnTheAccountLooksMissing(t *testing.T) {
	e := newEnv(t)
	key := e.account("acme", registry.Limits{})
	e.account("other", registry.Limits{})
	e.serve(emailTool, echo)
	e.connect("other", "email") // deployed, online, and someone else's

	for _, route := range []struct{ method, path, body string }{
		{http.MethodPost, "/tool-call/%s/send_email", goodEmail},
		{http.MethodPost, "/tools/%s/send_email", goodEmail},
		{http.MethodPost, "/tool-call/%s/no_such_method", `not json`},
		{http.MethodGet, "/tools/%s", ""},
		{http.MethodGet, "/tools/%s/openapi.json", ""},
	} {
		t.Run(route.method+" "+route.path, func(t *testing.T) {
			notConnected := e.do(route.method, strings.Replace(route.path, "%s", "email", 1), route.body, "SERVICE_API_KEY", key)
			missing := e.do(route.method, strings.Replace(route.path, "%s", "nope", 1), route.body, "SERVICE_API_KEY", key)
			notConnected.expect(t, http.StatusNotFound, edge.CodeToolNotFound)
			missing.expect(t, http.StatusNotFound, edge.CodeToolNotFound)
			a, b := withoutRequestID(t, notConnected.body), withoutRequestID(t, missing.body)
			if !bytes.Equal(a, b) {
				t.Fatalf("bodies differ:\nnot connected: %s\nmissing:       %s", a, b)
			}
			for _, h := range []string{"Content-Type", "Content-Length", "Retry-After", "WWW-Authenticate"} {
				if notConnected.header.Get(h) != missing.header.Get(h) {
					t.Fatalf("%s differs: %q and %q", h, notConnected.header.Get(h), missing.header.Get(h))
				}
			}
		})
	}
}

func withoutRequestID(t *testing.T, body []byte) []byte {
	t.Helper()
	var env edge.Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	env.Error.RequestID = ""
	b, _ := json.Marshal(env)
	return b
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestErrorAnswerSeesThroughWrapping: the mapping holds for wrapped errors too, and
// anything it does not know is an internal error that shows nothing of itself.
func TestErrorAnswerSeesThroughWrapping(t *testing.T) {
	for _, tc := range []struct {
		err        error
		status     int
		code       string
		retryAfter bool
	}{
		{fmt.Errorf("call: %w", registry.ErrToolNotFound), http.StatusNotFound, edge.CodeToolNotFound, false},
		{fmt.Errorf("call: %w", &gateway.RateLimitedError{RetryAfter: 1500 * time.Millisecond}), http.StatusTooManyRequests, edge.CodeRateLimited, true},
		{fmt.Errorf("call: %w", bus.ErrNoResponders), http.StatusServiceUnavailable, edge.CodeToolUnavailable, true},
		{&bus.PayloadTooLargeError{Size: 2 << 20, Max: 1 << 20}, http.StatusRequestEntityTooLarge, edge.CodePayloadTooLarge, false},
		{context.DeadlineExceeded, http.StatusGatewayTimeout, edge.CodeToolTimeout, false},
		{fmt.Errorf("revoke: %w", fmt.Errorf("%w: %w", registry.ErrUnavailable, context.DeadlineExceeded)), http.StatusServiceUnavailable, edge.CodeRegistryUnavailable, true},
		{errors.New("registry: put tg-keys/abc: disk on fire"), http.StatusInternalServerError, edge.CodeInternal, false},
	} {
		status, env, retryAfter := edge.ErrorAnswer(tc.err, "req_1")
		if status != tc.status || env.Error.Code != tc.code || env.Error.RequestID != "req_1" || (retryAfter > 0) != tc.retryAfter {
			t.Errorf("%v: %d %+v retry after %v", tc.err, status, env, retryAfter)
		}
		if strings.Contains(env.Error.Message, "disk") {
			t.Errorf("an internal error shows its text: %q", env.Error.Message)
		}
	}
	if got := edge.RetryAfterSeconds(1500 * time.Millisecond); got != 2 {
		t.Errorf("RetryAfterSeconds(1.5s) = %d, want 2", got)
	}
}
