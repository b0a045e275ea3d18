package registry_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestTakeTokens: a shared bucket starts full, gives what it holds and no more, says
// when the next token comes, and refills at its rate up to its burst.
func TestTakeTokens(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx := env.Store, env.Ctx
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	id := registry.KeyRateID("key_a")
	take := func(want int, at time.Duration) (int, time.Duration) {
		t.Helper()
		got, wait, err := store.TakeTokens(ctx, id, 2, 5, want, 0, t0.Add(at)) // 2 a second, burst 5
		if err != nil {
			t.Fatal(err)
		}
		return got, wait
	}
	if got, _ := take(3, 0); got != 3 {
		t.Fatalf("a new bucket gave %d of 3, want 3: it starts full", got)
	}
	if got, _ := take(3, 0); got != 2 {
		t.Fatalf("took %d of the 2 left, want 2", got)
	}
	if got, wait := take(1, 0); got != 0 || wait != 500*time.Millisecond {
		t.Fatalf("an empty bucket: %d tokens, next in %v; want none, next in 500ms", got, wait)
	}
	if got, _ := take(5, 1500*time.Millisecond); got != 3 {
		t.Fatalf("after 1.5 s at 2 a second: %d tokens, want 3", got)
	}
	if got, _ := take(10, time.Hour); got != 5 {
		t.Fatalf("after an hour: %d tokens, want the burst of 5", got)
	}
	if got, _ := take(1, 59*time.Minute); got != 0 {
		t.Fatalf("a clock behind the last writer's: %d tokens, want none (no refill for time gone backwards)", got)
	}

	// Unspent tokens of a lease go back, up to the burst, before the next take.
	later := t0.Add(time.Hour)
	if got, _, err := store.TakeTokens(ctx, id, 2, 5, 1, 3, later); err != nil || got != 1 {
		t.Fatalf("taking 1 while giving back 3 to an empty bucket: %d, %v; want 1", got, err)
	}
	if got, _, err := store.TakeTokens(ctx, id, 2, 5, 5, 0, later); err != nil || got != 2 {
		t.Fatalf("after giving back 3 and taking 1: %d tokens, want 2", got)
	}
	if got, _, err := store.TakeTokens(ctx, id, 2, 5, 1, 9, later); err != nil || got != 1 {
		t.Fatalf("giving back more than the burst: %d, %v; want 1 taken", got, err)
	}
	if got, _, err := store.TakeTokens(ctx, id, 2, 5, 9, 0, later); err != nil || got != 4 {
		t.Fatalf("after giving back 9 to a bucket of burst 5 and taking 1: %d tokens, want 4", got)
	}
}

// TestTakeTokensConcurrently: takers at the same instant, as edges are, never share a
// token: together they get the burst, no more.
func TestTakeTokensConcurrently(t *testing.T) {
	env := testenv.NewRegistry(t)
	now := time.Now()
	var got atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			n, _, err := env.Store.TakeTokens(env.Ctx, registry.LinkRateID("acme", "echo"), 0.001, 7, 1, 0, now)
			if err != nil {
				t.Error(err)
			}
			got.Add(int32(n))
		})
	}
	wg.Wait()
	if got.Load() != 7 {
		t.Fatalf("20 takers got %d tokens of a burst of 7", got.Load())
	}
}
