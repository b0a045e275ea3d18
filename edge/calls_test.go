package edge_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/calls"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
)

// slowWorker runs a worker of tool whose method slow reports half its progress, then
// waits to be released; a call cancelled meanwhile is reported on cancelled.
type slowWorker struct {
	started   chan string
	cancelled chan string
	release   chan struct{}
	nc        *nats.Conn
}

func (e *env) slowWorker(t *testing.T, tool string) *slowWorker {
	t.Helper()
	sw := &slowWorker{started: make(chan string, 16), cancelled: make(chan string, 16), release: make(chan struct{}),
		nc: testenv.Conn(t, e.nc.ConnectedUrl())}
	w := workers.New(sw.nc, workers.Tool{ID: tool}, workers.WithLogger(testenv.Logger(t)))
	w.Handle(workers.Method{Name: "slow", Timeout: 30 * time.Second, Handler: func(ctx context.Context, c *workers.Call) (any, error) {
		sw.started <- c.CallID
		if err := c.Progress(1, 2, "half way"); err != nil {
			return nil, err
		}
		select {
		case <-sw.release:
			return map[string]string{"done": c.CallID}, nil
		case <-ctx.Done():
			sw.cancelled <- c.CallID
			return nil, context.Cause(ctx)
		}
	}})
	e.runWorker(t, w, tool, sw.release)
	return sw
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testenv.Patience):
		t.Fatalf("%s: not within %v", what, testenv.Patience)
		var zero T
		return zero
	}
}

// startAsync makes a call with Prefer: respond-async and checks the 202: its Location,
// Preference-Applied, and the call's status, working. It returns the status and the
// request id of the request that started the call.
func (e *env) startAsync(t *testing.T, key, tool, method, body string, headers ...string) (edge.CallStatus, string) {
	t.Helper()
	r := e.call(key, tool, method, body, append([]string{"Prefer", "respond-async"}, headers...)...)
	if r.status != http.StatusAccepted {
		t.Fatalf("status %d, want 202; body %s", r.status, r.body)
	}
	st := decode[edge.CallStatus](t, r)
	if !strings.HasPrefix(st.ID, "call_") || st.Status != calls.Working || st.Tool != tool || st.Method != method {
		t.Fatalf("the call's status %+v", st)
	}
	if loc := r.header.Get("Location"); loc != "/calls/"+st.ID {
		t.Fatalf("Location %q, want /calls/%s", loc, st.ID)
	}
	if got := r.header.Get("Preference-Applied"); got != "respond-async" || r.header.Get(edge.HeaderCallStatus) != string(calls.Working) {
		t.Fatalf("Preference-Applied %q, %s %q", got, edge.HeaderCallStatus, r.header.Get(edge.HeaderCallStatus))
	}
	if st.URLs.Status != e.url+"/calls/"+st.ID || st.URLs.Cancel != st.URLs.Status {
		t.Fatalf("urls %+v", st.URLs)
	}
	return st, r.header.Get("X-Request-Id")
}

// knowsKey waits until the edge knows key.
func (e *env) knowsKey(t *testing.T, key string) {
	t.Helper()
	testenv.WaitFor(t, "the edge knows the key", func() bool {
		_, err := e.view.Snapshot().AuthenticateKey(key, time.Now())
		return err == nil
	})
}

// readCall reads a call until ready says its answer is the one to check.
func (e *env) readCall(t *testing.T, key, id, what string, ready func(result) bool) result {
	t.Helper()
	var r result
	testenv.WaitFor(t, what, func() bool {
		r = e.do(http.MethodGet, "/calls/"+id, "", "SERVICE_API_KEY", key)
		return ready(r)
	})
	return r
}

func ended(r result) bool { return r.status != http.StatusAccepted }

// failedCall checks the answer to a read of a call that failed: the status and code
// the synchronous call would have had, in the envelope of the request that started it.
func failedCall(t *testing.T, r result, status int, callStatus calls.Status, code, startedBy string) edge.EnvelopeError {
	t.Helper()
	if r.status != status || r.header.Get(edge.HeaderCallStatus) != string(callStatus) {
		t.Fatalf("status %d (%s), want %d (%s); body %s", r.status, r.header.Get(edge.HeaderCallStatus), status, callStatus, r.body)
	}
	var env edge.Envelope
	if err := json.Unmarshal(r.body, &env); err != nil || env.Error.Code != code || env.Error.RequestID != startedBy {
		t.Fatalf("envelope %s, want code %s naming request %s", r.body, code, startedBy)
	}
	return env.Error
}

// TestCallsThatOutliveTheirRequest: a call made with Prefer: respond-async is answered
// 202 at once, runs to its end on the edge that took it, and is read and cancelled
// through any edge, by the key that made it only.
func TestCallsThatOutliveTheirRequest(t *testing.T) {
	e := newEnv(t)
	other := newEnv(t, onServer(e.srv.ClientURL()))
	key := e.account("acme", registry.Limits{})
	e.serve(echoTool, func(_ string, m *nats.Msg) {
		if strings.Contains(string(m.Data), "fail") {
			respondError(m, "bounced", "the tool could not")
			return
		}
		respond(m, 0, "application/json", m.Data)
	})
	e.connect("acme", "echo")
	sw := e.slowWorker(t, "slowpoke")
	e.connect("acme", "slowpoke")
	other.knowsKey(t, key)

	t.Run("another edge answers with the synchronous call's status, type and bytes", func(t *testing.T) {
		const body = `{"hello":"world","n":1.0}`
		sync := e.call(key, "echo", "echo", body)
		st, _ := e.startAsync(t, key, "echo", "echo", body)
		got := other.readCall(t, key, st.ID, "the call ends", ended)
		if got.status != sync.status || got.header.Get("Content-Type") != sync.header.Get("Content-Type") || string(got.body) != string(sync.body) {
			t.Fatalf("async: %d %q %s; sync: %d %q %s", got.status, got.header.Get("Content-Type"), got.body,
				sync.status, sync.header.Get("Content-Type"), sync.body)
		}
		if got.header.Get(edge.HeaderCallStatus) != string(calls.Completed) {
			t.Fatalf("%s %q, want completed", edge.HeaderCallStatus, got.header.Get(edge.HeaderCallStatus))
		}
	})

	t.Run("a failed call reads as the synchronous call's envelope", func(t *testing.T) {
		sync := e.call(key, "echo", "echo", `{"fail":true}`)
		want := sync.expect(t, http.StatusBadGateway, edge.CodeToolError)
		r := e.call(key, "echo", "echo", `{"fail":true}`, "Prefer", "wait=5, respond-async")
		st := decode[edge.CallStatus](t, r)
		got := failedCall(t, other.readCall(t, key, st.ID, "the call ends", ended), http.StatusBadGateway, calls.Failed,
			edge.CodeToolError, r.header.Get("X-Request-Id"))
		gotDetails, _ := json.Marshal(got.Details)
		wantDetails, _ := json.Marshal(want.Details)
		if got.Message != want.Message || string(gotDetails) != string(wantDetails) {
			t.Fatalf("async %+v, sync %+v", got, want)
		}
	})

	t.Run("a call refused before it starts is refused at once", func(t *testing.T) {
		e.call(key, "nosuch", "echo", `{}`, "Prefer", "respond-async").expect(t, http.StatusNotFound, edge.CodeToolNotFound)
		e.call(key, "echo", "echo", `[1]`, "Prefer", "respond-async").expect(t, http.StatusBadRequest, edge.CodeInvalidJSON)
	})

	t.Run("a slow call reads working with its progress, then completed", func(t *testing.T) {
		st, _ := e.startAsync(t, key, "slowpoke", "slow", `{}`)
		callID := receive(t, sw.started, "the worker starts the call")
		r := other.readCall(t, key, st.ID, "the call's progress is recorded", func(r result) bool {
			return r.status == http.StatusAccepted && decode[edge.CallStatus](t, r).Progress != nil
		})
		if p := decode[edge.CallStatus](t, r).Progress; p.Progress != 1 || p.Total != 2 || p.Message != "half way" {
			t.Fatalf("progress %+v", p)
		}
		if r.header.Get("Retry-After") == "" {
			t.Fatal("a working call's status without Retry-After")
		}
		sw.release <- struct{}{}
		r = other.readCall(t, key, st.ID, "the call ends", ended)
		if r.status != http.StatusOK || string(r.body) != `{"done":"`+callID+`"}` {
			t.Fatalf("status %d, body %s", r.status, r.body)
		}
	})

	t.Run("DELETE through another edge cancels, and the worker sees the cancel", func(t *testing.T) {
		st, startedBy := e.startAsync(t, key, "slowpoke", "slow", `{}`)
		callID := receive(t, sw.started, "the worker starts the call")
		r := other.do(http.MethodDelete, "/calls/"+st.ID, "", "SERVICE_API_KEY", key)
		if r.status != http.StatusOK || decode[edge.CallStatus](t, r).Status != calls.Cancelled {
			t.Fatalf("DELETE: %d %s", r.status, r.body)
		}
		if got := receive(t, sw.cancelled, "the worker sees the cancel"); got != callID {
			t.Fatalf("the worker saw call %s cancelled, want %s", got, callID)
		}
		failedCall(t, e.do(http.MethodGet, "/calls/"+st.ID, "", "SERVICE_API_KEY", key),
			gateway.StatusClientClosedRequest, calls.Cancelled, edge.CodeCanceled, startedBy)
		other.do(http.MethodDelete, "/calls/"+st.ID, "", "SERVICE_API_KEY", key).expect(t, http.StatusConflict, edge.CodeConflict)
	})

	t.Run("another key, and a made-up id, find no call", func(t *testing.T) {
		st, _ := e.startAsync(t, key, "echo", "echo", `{}`)
		e.readCall(t, key, st.ID, "the call ends", ended)
		stranger := e.account("globex", registry.Limits{})
		sibling := e.key("acme", nil)
		for _, k := range []string{stranger, sibling} {
			e.do(http.MethodGet, "/calls/"+st.ID, "", "SERVICE_API_KEY", k).expect(t, http.StatusNotFound, gateway.CodeCallNotFound)
			e.do(http.MethodDelete, "/calls/"+st.ID, "", "SERVICE_API_KEY", k).expect(t, http.StatusNotFound, gateway.CodeCallNotFound)
		}
		for _, id := range []string{"call_" + strings.Repeat("0", 22), "call_", "x" + st.ID[1:], st.ID + ".answer"} {
			e.do(http.MethodGet, "/calls/"+id, "", "SERVICE_API_KEY", key).expect(t, http.StatusNotFound, gateway.CodeCallNotFound)
		}
		e.do(http.MethodGet, "/calls/"+st.ID, "").expect(t, http.StatusUnauthorized, edge.CodeUnauthenticated)
	})
}

// TestCallsThatLoseTheirRunner: a call whose worker dies fails within seconds, as the
// synchronous call does; one whose edge stops gracefully is recorded as lost; one whose
// edge died reads as timed out once its deadline passed, never as working for ever.
func TestCallsThatLoseTheirRunner(t *testing.T) {
	e := newEnv(t)
	key := e.account("acme", registry.Limits{})

	t.Run("a call whose worker dies fails within seconds", func(t *testing.T) {
		hw := e.holdingWorker(t, "fragile", 4)
		e.connect("acme", "fragile")
		r := e.call(key, "fragile", "hold", `{}`, "Prefer", "respond-async")
		st := decode[edge.CallStatus](t, r)
		id := hw.waitStarted(t)
		hw.waitHeld(t, id)
		killed := time.Now()
		hw.nc.Close()
		got := e.readCall(t, key, st.ID, "the call fails", ended)
		failedCall(t, got, http.StatusServiceUnavailable, calls.Failed, edge.CodeToolUnavailable, r.header.Get("X-Request-Id"))
		if got.header.Get("Retry-After") == "" {
			t.Fatal("a 503 without Retry-After")
		}
		t.Logf("the call read failed %v after its worker died", time.Since(killed).Round(time.Millisecond))
	})

	t.Run("a call whose edge stops is recorded as lost", func(t *testing.T) {
		stopping := newEnv(t, onServer(e.srv.ClientURL()), withEdge(func(c *edge.Config) { c.ShutdownTimeout = 200 * time.Millisecond }))
		hw := stopping.holdingWorker(t, "lingering", 4)
		e.connect("acme", "lingering")
		testenv.WaitFor(t, "the stopping edge sees the key and connection", func() bool {
			snap := stopping.view.Snapshot()
			p, err := snap.AuthenticateKey(key, time.Now())
			if err == nil {
				_, err = snap.Method(p, "lingering", "hold")
			}
			return err == nil
		})
		r := stopping.call(key, "lingering", "hold", `{}`, "Prefer", "respond-async")
		st := decode[edge.CallStatus](t, r)
		hw.waitStarted(t)
		if err := stopping.stop(); err != nil {
			t.Fatal(err)
		}
		got := e.readCall(t, key, st.ID, "the call fails", ended)
		failedCall(t, got, http.StatusServiceUnavailable, calls.Failed, edge.CodeToolUnavailable, r.header.Get("X-Request-Id"))
	})

	t.Run("a call whose edge died reads as timed out past its deadline", func(t *testing.T) {
		p := principalOf(t, e, key)
		rec := calls.Record{ID: "call_" + strings.Repeat("7", 22), Account: p.Account, KeyID: p.Key.ID, Tool: "echo", Method: "echo",
			CallID: "async-x", RequestID: "req_gone", Status: calls.Working, CreatedAt: time.Now().Add(-time.Minute),
			Deadline: time.Now().Add(-time.Minute + 3*time.Second)}
		b, _ := json.Marshal(rec)
		kv, err := e.store.JetStream().KeyValue(testenv.Context(t), calls.Bucket)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(testenv.Context(t), rec.ID, b); err != nil {
			t.Fatal(err)
		}
		failedCall(t, e.do(http.MethodGet, "/calls/"+rec.ID, "", "SERVICE_API_KEY", key), http.StatusGatewayTimeout, calls.Failed, edge.CodeToolTimeout, "req_gone")
		e.do(http.MethodDelete, "/calls/"+rec.ID, "", "SERVICE_API_KEY", key).expect(t, http.StatusConflict, edge.CodeConflict)
	})
}

func principalOf(t *testing.T, e *env, key string) registry.Principal {
	t.Helper()
	p, err := e.view.Snapshot().AuthenticateKey(key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAsyncDeadlines: a call that outlives its request has its method's deadline,
// shortened by Tg-Timeout, and bounded by the gateway's async maximum rather than its
// maximum for a call a caller waits on.
func TestAsyncDeadlines(t *testing.T) {
	e := newEnv(t, withGateway(func(c *gateway.Config) {
		c.MaxTimeout, c.AsyncMaxTimeout = time.Minute, 7*time.Minute
	}))
	key := e.account("acme", registry.Limits{})
	e.serve(registry.Tool{ID: "long", Methods: []registry.Method{
		{Name: "ten", Timeout: wire.Duration(10 * time.Minute)},
		{Name: "three", Timeout: wire.Duration(3 * time.Minute)},
	}}, echo)
	e.connect("acme", "long")
	for _, c := range []struct {
		method, asked string
		want          time.Duration
	}{
		{"ten", "", 7 * time.Minute},
		{"three", "", 3 * time.Minute},
		{"ten", "90s", 90 * time.Second},
	} {
		st, _ := e.startAsync(t, key, "long", c.method, `{}`, "Tg-Timeout", c.asked)
		e.readCall(t, key, st.ID, "the call ends", ended)
		if got := st.Deadline.Sub(st.CreatedAt); got < c.want-time.Second || got > c.want {
			t.Errorf("%s with Tg-Timeout %q: deadline %v after the start, want %v", c.method, c.asked, got, c.want)
		}
	}
}

// TestAsyncAnswersLargerThanAMessage: an answer past one NATS message is kept in the
// answers' object store and read back whole through any edge, as the synchronous call
// answers it: a tool's 10 MiB echo (sha256 compared) and a failure's envelope past
// 1 MiB. Another key reads neither.
func TestAsyncAnswersLargerThanAMessage(t *testing.T) {
	e := newEnv(t)
	other := newEnv(t, onServer(e.srv.ClientURL()))
	e.runEcho(t)
	key := e.account("acme", registry.Limits{})
	stranger := e.account("globex", registry.Limits{})
	e.connect("acme", "echo")
	other.knowsKey(t, key)

	body := jsonBody(t, 10<<20)
	want := sha256.Sum256(body)
	st, _ := e.startAsync(t, key, "echo", "echo", string(body))
	got := other.readCall(t, key, st.ID, "the call ends", ended)
	if got.status != http.StatusOK || got.header.Get(edge.HeaderCallStatus) != string(calls.Completed) ||
		sha256.Sum256(got.body) != want || got.header.Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Fatalf("read through another edge: %d (%s), %d bytes, sha256 equal %v: %.200s", got.status,
			got.header.Get(edge.HeaderCallStatus), len(got.body), sha256.Sum256(got.body) == want, got.body)
	}
	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := js.ObjectStore(testenv.Context(t), calls.AnswerBucket)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := obj.GetInfo(testenv.Context(t), st.ID); err != nil || info.Size != uint64(len(body)) {
		t.Fatalf("the answer's object: %+v, %v", info, err)
	}
	e.do(http.MethodGet, "/calls/"+st.ID, "", "SERVICE_API_KEY", stranger).expect(t, http.StatusNotFound, gateway.CodeCallNotFound)

	// JSON escapes '<' in six bytes: the envelope of this error is several times the
	// tool's reply, which the bus carried.
	data := []byte(`"` + strings.Repeat("<", 400_000) + `"`)
	e.serve(registry.Tool{ID: "bouncer", Methods: []registry.Method{{Name: "echo"}}}, func(_ string, m *nats.Msg) {
		_ = m.RespondMsg(wire.ErrorReply(m.Reply, &wire.ToolError{Code: "big", Message: "too much", Data: data}))
	})
	e.connect("acme", "bouncer")
	sync := e.call(key, "bouncer", "echo", `{}`)
	sync.expect(t, http.StatusBadGateway, edge.CodeToolError)
	if len(sync.body) <= int(e.nc.MaxPayload()) {
		t.Fatalf("the envelope has %d bytes, no more than a message", len(sync.body))
	}
	r := e.call(key, "bouncer", "echo", `{}`, "Prefer", "respond-async")
	st = decode[edge.CallStatus](t, r)
	failed := other.readCall(t, key, st.ID, "the call ends", ended)
	failedCall(t, failed, http.StatusBadGateway, calls.Failed, edge.CodeToolError, r.header.Get("X-Request-Id"))
	if len(failed.body) != len(sync.body) {
		t.Fatalf("the envelope read back has %d bytes, the synchronous one %d", len(failed.body), len(sync.body))
	}
}

// TestAsyncCallsInTheAuditTrail: a call that outlives its request is recorded as any
// call is, once: refused at once, or when it ended, with the parameters as the caller
// sent them.
func TestAsyncCallsInTheAuditTrail(t *testing.T) {
	e := newEnv(t, withAudit())
	key := e.account("acme", registry.Limits{})
	e.serve(echoTool, echo)
	e.connect("acme", "echo")
	const body = `{"n":1.0}`
	st, startedBy := e.startAsync(t, key, "echo", "echo", body)
	e.readCall(t, key, st.ID, "the call ends", ended)
	e.call(key, "echo", "echo", `[1]`, "Prefer", "respond-async").expect(t, http.StatusBadRequest, edge.CodeInvalidJSON)
	records := e.awaitRecords(url.Values{"account": {"acme"}, "kind": {audit.KindCall}}, 2)
	byOutcome := map[string]audit.Record{}
	for _, r := range records {
		byOutcome[r.Outcome] = r
	}
	ok := byOutcome[audit.OutcomeOK]
	if ok.RequestID != startedBy || ok.ArgsSHA256 != sha(body) || ok.Status != http.StatusOK || ok.Transport != audit.TransportREST || ok.Key != keyID(t, e, key) {
		t.Fatalf("the call's record %+v", ok)
	}
	if r := byOutcome[edge.CodeInvalidJSON]; r.Status != http.StatusBadRequest {
		t.Fatalf("the refused call's record %+v", r)
	}
}
