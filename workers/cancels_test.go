package workers

import (
	"fmt"
	"testing"
	"time"
)

func TestRecentCancels(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := newRecentCancels(time.Minute, 3)

	r.add("a", t0)
	if !r.has("a", t0.Add(59*time.Second)) || r.has("a", t0.Add(time.Minute)) {
		t.Fatal("a cancel is remembered for exactly the window")
	}
	if r.has("b", t0) {
		t.Fatal("an id never cancelled is not remembered")
	}

	// Past the bound the oldest go first.
	r.add("b", t0.Add(time.Second))
	r.add("c", t0.Add(2*time.Second))
	r.add("d", t0.Add(3*time.Second))
	now := t0.Add(4 * time.Second)
	if r.has("a", now) || !r.has("b", now) || !r.has("c", now) || !r.has("d", now) {
		t.Fatalf("after 4 cancels with room for 3: %v, want b, c and d", r.at)
	}

	// Cancelled again, an id is remembered from its latest cancel, even when its first
	// mark leaves the queue.
	r.add("b", t0.Add(50*time.Second))
	r.add("e", t0.Add(70*time.Second)) // c and d (and b's first mark) are out of the window
	if !r.has("b", t0.Add(100*time.Second)) || r.has("c", t0.Add(70*time.Second)) {
		t.Fatalf("at 70 s: %v, want b (cancelled again at 50 s) and e", r.at)
	}

	// The queue does not grow without end.
	for i := range 100_000 {
		r.add(fmt.Sprint(i), t0.Add(time.Hour+time.Duration(i)*time.Millisecond))
	}
	if len(r.at) > 3 || cap(r.queue) > 64 {
		t.Fatalf("after 100,000 cancels: %d remembered, queue capacity %d", len(r.at), cap(r.queue))
	}
}
