package chaos_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/workers"
)

// LongCall is how long the call that outlives its edge runs with TOOLGATE_LONG_CALL=1:
// the three minutes of the issue. Without it the call runs ShortCall, so that make test
// stays short; what is checked is the same.
const (
	LongCall  = 3 * time.Minute
	ShortCall = 10 * time.Second
)

// workerDeathBound is how soon a call whose worker died must read as failed.
const workerDeathBound = 2 * time.Second

func longCall() time.Duration {
	if os.Getenv("TOOLGATE_LONG_CALL") == "1" {
		return LongCall
	}
	return ShortCall
}

// TestAsyncCallsOutliveTheirEdge: on the chaos stack (three NATS nodes, two edges and
// the demo workers as processes), a call made with Prefer: respond-async through one
// edge runs on while that edge is killed and then the NATS node leading the calls'
// bucket is killed; it completes, and its answer is read through the other edge,
// while another account's key reading it gets 404. Then a call whose worker is killed
// while it runs reads as failed within workerDeathBound, never working.
func TestAsyncCallsOutliveTheirEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("the stack runs as processes; -short skips it")
	}
	s := startStack(t, testenv.Toolgate(t))
	d := longCall()
	started := startLongWorker(t, s, d)
	s.adminCall(http.MethodPost, "/admin/connections", `{"account":"chaos","tool":"longcall"}`)
	s.adminCall(http.MethodPost, "/admin/accounts", `{"id":"stranger"}`)
	var stranger struct {
		Key string `json:"key"`
	}
	_ = json.Unmarshal(s.adminCall(http.MethodPost, "/admin/keys", `{"account":"stranger","name":"other"}`), &stranger)

	get := func(edge int, key, id string) (int, string, []byte) {
		req, _ := http.NewRequest(http.MethodGet, s.urls[edge]+"/calls/"+id, nil)
		req.Header.Set("SERVICE_API_KEY", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Tg-Call-Status"), b
	}
	id := s.startAsync(0, "longcall", "run", `{}`)
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the long call never started")
	}
	t.Logf("call %s runs for %v; killing edge-1, which runs it", id, d)
	s.edges[0].kill()
	time.Sleep(d / 4)
	leader := s.leaderOf("KV_tg-calls")
	t.Logf("killing %s, the leader of the calls' bucket", s.nats[leader].name)
	s.nats[leader].kill()
	time.Sleep(d / 4)
	s.nats[leader].start()

	var status int
	var callStatus string
	var body []byte
	waitWithin(t, "the call completes, read through edge-2", d+2*time.Minute, func() bool {
		status, callStatus, body = get(1, s.key, id)
		if callStatus != "" && callStatus != "working" {
			return true
		}
		time.Sleep(time.Second)
		return false
	})
	if status != http.StatusOK || callStatus != "completed" || !strings.Contains(string(body), `"ran_ms"`) {
		t.Fatalf("the call: %d %s %s", status, callStatus, body)
	}
	if st, _, b := get(1, stranger.Key, id); st != http.StatusNotFound {
		t.Fatalf("another account's key reads the call: %d %s", st, b)
	}

	s.edges[0].start()
	s.waitReady(s.urls[0], time.Minute)
	id = s.startAsync(1, "clock", "wait", `{"ms":20000}`)
	time.Sleep(time.Second) // taken by a worker
	killed := time.Now()
	for _, w := range s.workers {
		w.kill()
	}
	for {
		_, callStatus, body = get(1, s.key, id)
		if callStatus != "working" {
			break
		}
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("the call still works 30 s after its worker died")
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(killed)
	t.Logf("the call read %s %.0f ms after its workers were killed: %s", callStatus, ms(took), body)
	if callStatus != "failed" || took > workerDeathBound {
		t.Fatalf("a call whose worker died: %s after %v, want failed within %v", callStatus, took, workerDeathBound)
	}
}

// startLongWorker runs, in this process, a worker of the tool longcall whose method run
// takes d, and returns where each call it starts is told.
func startLongWorker(t *testing.T, s *stack, d time.Duration) <-chan struct{} {
	t.Helper()
	nc, err := nats.Connect(s.natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), workers.Inbox("longcall"))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 4)
	w := workers.New(nc, workers.Tool{ID: "longcall", Title: "Long call"}, workers.WithLogger(testenv.Logger(t)))
	w.Handle(workers.Method{Name: "run", Timeout: d + time.Minute, Handler: func(ctx context.Context, c *workers.Call) (any, error) {
		started <- struct{}{}
		select {
		case <-time.After(d):
			return map[string]int64{"ran_ms": d.Milliseconds()}, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done; nc.Close() })
	select {
	case <-w.Ready():
	case err := <-done:
		t.Fatalf("worker: %v", err)
	}
	return started
}

// startAsync makes a call with Prefer: respond-async through edge and returns its id.
func (s *stack) startAsync(edge int, tool, method, body string) string {
	s.t.Helper()
	var id string
	waitWithin(s.t, tool+" takes a call through edge-"+string(rune('1'+edge)), time.Minute, func() bool {
		req, _ := http.NewRequest(http.MethodPost, s.urls[edge]+"/tool-call/"+tool+"/"+method, strings.NewReader(body))
		req.Header.Set("SERVICE_API_KEY", s.key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Prefer", "respond-async")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var st struct {
			ID string `json:"id"`
		}
		if resp.StatusCode != http.StatusAccepted || json.NewDecoder(resp.Body).Decode(&st) != nil {
			time.Sleep(200 * time.Millisecond)
			return false
		}
		id = st.ID
		return true
	})
	return id
}

// waitWithin waits until cond holds, for at most within.
func waitWithin(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leaderOf is the index of the NATS node leading stream.
func (s *stack) leaderOf(stream string) int {
	s.t.Helper()
	nc, err := nats.Connect(s.natsURL)
	if err != nil {
		s.t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		s.t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil || info.Cluster == nil {
		s.t.Fatalf("%s: %v", stream, err)
	}
	for i := range s.nats {
		if info.Cluster.Leader == "n"+string(rune('1'+i)) {
			return i
		}
	}
	s.t.Fatalf("%s: leader %q is no node of the stack", stream, info.Cluster.Leader)
	return 0
}
