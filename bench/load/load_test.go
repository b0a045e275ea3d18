package load_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bench/load"
	"github.com/toolgate/toolgate/internal/testenv"
)

// server is a real HTTP server on loopback whose handler sleeps for delay.
func server(t *testing.T, delay time.Duration, hits *atomic.Int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		time.Sleep(delay)
		w.Write([]byte("ok"))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

func get(url string) load.Func {
	return func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
}

func TestSaturateStopsAtItsCount(t *testing.T) {
	var hits atomic.Int64
	url := server(t, 0, &hits)
	r := load.Saturate(context.Background(), 4, time.Minute, 200, get(url))
	if r.Requests != 200 || hits.Load() != 200 || r.Errors != 0 {
		t.Fatalf("got %d requests (%d errors), server saw %d; want exactly 200", r.Requests, r.Errors, hits.Load())
	}
}

func TestSaturateMeasuresTheTargetsLatency(t *testing.T) {
	var hits atomic.Int64
	url := server(t, 5*time.Millisecond, &hits)
	// Bounded by its count: a window of time could end, on a loaded machine, before
	// any request had its answer.
	r := load.Saturate(context.Background(), 2, testenv.Patience, 20, get(url))
	if r.Requests != 20 || r.Errors != 0 {
		t.Fatalf("got %d requests (%d errors, first: %v), want 20", r.Requests, r.Errors, r.FirstErr)
	}
	if p50 := r.Percentile(0.5); p50 < 5*time.Millisecond {
		t.Fatalf("p50 %v below the handler's own 5ms", p50)
	}
}

func TestSaturateStopsAtItsDuration(t *testing.T) {
	var hits atomic.Int64
	url := server(t, 5*time.Millisecond, &hits)
	r := load.Saturate(context.Background(), 2, 300*time.Millisecond, 1<<30, get(url))
	if r.Elapsed > 2*time.Second {
		t.Fatalf("ran %v, bounded at 300ms", r.Elapsed)
	}
}

func TestPacedKeepsItsRate(t *testing.T) {
	var hits atomic.Int64
	url := server(t, 0, &hits)
	r := load.Paced(context.Background(), 200, 500*time.Millisecond, 1<<30, 1000, get(url)) // more slots than requests: only the schedule is under test
	if r.Requests != 100 || r.Errors != 0 {
		t.Fatalf("got %d requests (%d errors, first: %v), want 100 at 200/s for 0.5s", r.Requests, r.Errors, r.FirstErr)
	}
}

func TestPacedCountsWhatTheTargetCouldNotTake(t *testing.T) {
	r := load.Paced(context.Background(), 1000, 100*time.Millisecond, 1<<30, 2, func(ctx context.Context) error {
		time.Sleep(50 * time.Millisecond)
		return nil
	})
	if r.Errors == 0 || r.FirstErr == nil {
		t.Fatalf("a target slower than the rate with 2 slots: got %d errors, want some", r.Errors)
	}
}

func TestErrorsAreCountedNotTimed(t *testing.T) {
	boom := errors.New("boom")
	r := load.Saturate(context.Background(), 1, time.Second, 10, func(context.Context) error { return boom })
	if r.Errors != 10 || !errors.Is(r.FirstErr, boom) || r.Percentile(0.5) != 0 {
		t.Fatalf("got %+v", r)
	}
}
