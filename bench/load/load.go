// Package load drives a target with requests and measures what it sustains: at
// saturation (a fixed number of callers as fast as they can) and at a fixed rate (an
// open loop, so a slow reply shows as latency instead of quietly lowering the rate).
// Every run is bounded in duration and in count.
package load

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Func makes one request. An error counts against the run; its latency is not kept.
type Func func(ctx context.Context) error

// Result is one run's outcome.
type Result struct {
	Requests  int
	Errors    int
	FirstErr  error
	Elapsed   time.Duration
	latencies []time.Duration // sorted
}

// RPS is successful requests per second.
func (r Result) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests-r.Errors) / r.Elapsed.Seconds()
}

// Percentile returns the latency below which a fraction p (0..1) of successful
// requests fell.
func (r Result) Percentile(p float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	i := int(p * float64(len(r.latencies)-1))
	return r.latencies[i]
}

func (r Result) String() string {
	return fmt.Sprintf("%d requests (%d errors) in %v: %.0f/s, p50 %v, p99 %v",
		r.Requests, r.Errors, r.Elapsed.Round(time.Millisecond), r.RPS(), r.Percentile(0.5), r.Percentile(0.99))
}

type recorder struct {
	mu        sync.Mutex
	latencies []time.Duration
	errors    int
	firstErr  error
}

func (rec *recorder) add(local []time.Duration, errs int, firstErr error) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.latencies = append(rec.latencies, local...)
	rec.errors += errs
	if rec.firstErr == nil {
		rec.firstErr = firstErr
	}
}

func (rec *recorder) result(elapsed time.Duration) Result {
	slices.Sort(rec.latencies)
	return Result{
		Requests: len(rec.latencies) + rec.errors, Errors: rec.errors, FirstErr: rec.firstErr,
		Elapsed: elapsed, latencies: rec.latencies,
	}
}

// Saturate runs fn from callers goroutines, each starting its next request when the
// last one ends, until duration passes or max requests have started.
func Saturate(ctx context.Context, callers int, duration time.Duration, max int, fn Func) Result {
	ctx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	var started atomic.Int64
	var rec recorder
	var wg sync.WaitGroup
	start := time.Now()
	for range callers {
		wg.Go(func() {
			var local []time.Duration
			var errs int
			var firstErr error
			for ctx.Err() == nil && started.Add(1) <= int64(max) {
				t := time.Now()
				if err := fn(ctx); err != nil {
					if ctx.Err() != nil {
						break // cut off by the run's end, not a failure of the target
					}
					errs++
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				local = append(local, time.Since(t))
			}
			rec.add(local, errs, firstErr)
		})
	}
	wg.Wait()
	return rec.result(time.Since(start))
}

// Paced starts requests at rate per second for duration (at most max of them, and at
// most inFlight at once). The loop never waits for the target, so a slow target
// cannot lower the rate; each request is timed from when it is sent, which leaves
// the generator's own timer lateness out. A request the schedule could not start
// because inFlight were busy counts as an error: the target did not keep up.
func Paced(ctx context.Context, rate float64, duration time.Duration, max, inFlight int, fn Func) Result {
	ctx, cancel := context.WithTimeout(ctx, duration+10*time.Second) // let the last requests finish
	defer cancel()
	interval := time.Duration(float64(time.Second) / rate)
	total := min(max, int(duration/interval))
	slots := make(chan struct{}, inFlight)
	var rec recorder
	var wg sync.WaitGroup
	start := time.Now()
	for i := range total {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		select {
		case slots <- struct{}{}:
		default:
			rec.add(nil, 1, fmt.Errorf("load: %d requests in flight: target not keeping up", inFlight))
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			sent := time.Now()
			if err := fn(ctx); err != nil {
				rec.add(nil, 1, err)
				return
			}
			rec.add([]time.Duration{time.Since(sent)}, 0, nil)
		})
	}
	wg.Wait()
	return rec.result(time.Since(start))
}

// Merge is the runs rs taken as one: their requests and errors added up, their
// latencies pooled for the percentiles, and their elapsed times summed, so that RPS
// is the throughput over the time the runs took together.
func Merge(rs ...Result) Result {
	var m Result
	for _, r := range rs {
		m.Requests += r.Requests
		m.Errors += r.Errors
		m.Elapsed += r.Elapsed
		if m.FirstErr == nil {
			m.FirstErr = r.FirstErr
		}
		m.latencies = append(m.latencies, r.latencies...)
	}
	slices.Sort(m.latencies)
	return m
}
