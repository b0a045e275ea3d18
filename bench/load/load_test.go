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

func TestMergePoolsRuns(t *testing.T) {
	boom := errors.New("boom")
	var n atomic.Int64
	// Latencies of one run all below the other's: the merged median lies between.
	fast := load.Saturate(context.Background(), 1, time.Minute, 10, func(context.Context) error { return nil })
	slow := load.Saturate(context.Background(), 1, time.Minute, 10, func(context.Context) error {
		if n.Add(1) == 1 {
			return boom
		}
		time.Sleep(2 * time.Millisecond)
		return nil
	})
	m := load.Merge(fast, slow)
	if m.Requests != 20 || m.Errors != 1 || !errors.Is(m.FirstErr, boom) || m.Elapsed != fast.Elapsed+slow.Elapsed {
		t.Fatalf("merged %+v from %+v and %+v", m, fast, slow)
	}
	if m.Percentile(0) != fast.Percentile(0) || m.Percentile(1) != slow.Percentile(1) {
		t.Fatalf("merged latencies span %v..%v, want %v..%v", m.Percentile(0), m.Percentile(1), fast.Percentile(0), slow.Percentile(1))
	}
	if want := float64(19) / m.Elapsed.Seconds(); m.RPS() != want {
		t.Fatalf("RPS %v, want %v", m.RPS(), want)
	}
}
