package registry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestKeysAreMadeAndRevokedWhileTheRegistryElectsALeader: two of the three nodes stop,
// so the buckets' streams have no quorum and no leader, and one comes back. A key
// created meanwhile is written once the streams have a leader again, within
// Options.WriteWait, and revoked, instead of being refused: an administrator never sees
// the election. With no quorum for longer than WriteWait, the change fails once
// WriteWait has passed, not before and not never.
func TestKeysAreMadeAndRevokedWhileTheRegistryElectsALeader(t *testing.T) {
	c := testenv.NewCluster(t)
	nc := testenv.Conn(t, c.AllURLs())
	ctx := testenv.Context(t)
	open := func(wait time.Duration) *registry.Store {
		opts := registry.DefaultOptions()
		opts.Replicas, opts.WriteWait = 3, wait
		store, err := registry.Open(ctx, nc, opts)
		if err != nil {
			t.Fatal(err)
		}
		return store
	}
	store, short := open(45*time.Second), open(3*time.Second)
	if _, err := store.CreateAccount(ctx, registry.Account{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	c.Stop(1)
	c.Stop(2)

	type created struct {
		key    *registry.Key
		secret string
		err    error
	}
	began := time.Now()
	shortDone := make(chan error, 1)
	go func() {
		_, _, err := short.CreateKey(context.Background(), registry.NewKeyRequest{Account: "acme", Name: "no quorum"})
		shortDone <- err
	}()
	done := make(chan created, 1)
	go func() {
		k, secret, err := store.CreateKey(context.Background(), registry.NewKeyRequest{Account: "acme", Name: "during"})
		done <- created{k, secret, err}
	}()

	t.Run("with no quorum past WriteWait, a change fails once WriteWait has passed", func(t *testing.T) {
		select {
		case err := <-shortDone:
			if err == nil || errors.Is(err, registry.ErrExists) {
				t.Fatalf("a key created with no quorum: %v", err)
			}
			if !errors.Is(err, registry.ErrUnavailable) {
				t.Fatalf("a change given up on: %v, want ErrUnavailable", err)
			}
			if waited := time.Since(began); waited < 3*time.Second {
				t.Fatalf("gave up after %s, before WriteWait (3s): %v", waited, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the change neither succeeded nor failed")
		}
	})

	c.Start(t, 1)
	r := <-done
	if r.err != nil {
		t.Fatalf("a key created while the registry had no leader: %v", r.err)
	}
	revoked, err := store.RevokeKey(ctx, registry.Hash(r.secret))
	if err != nil || revoked.RevokedAt == nil || revoked.ID != r.key.ID {
		t.Fatalf("revoking it: %v %+v", err, revoked)
	}
	t.Logf("created %s after quorum was lost, and revoked", time.Since(began).Round(time.Millisecond))
}

// TestConcurrentChangesOfAReplicatedRecordAllLand: on a bucket with three replicas,
// JetStream refuses a compare-and-set write that lost the race with another code than
// on a single node; each such change is made again on what the winner wrote, so every
// change lands and none fails.
func TestConcurrentChangesOfAReplicatedRecordAllLand(t *testing.T) {
	c := testenv.NewCluster(t)
	ctx := testenv.Context(t)
	store := testenv.Store(t, testenv.Conn(t, c.URL()), 3)
	if _, err := store.CreateAccount(ctx, registry.Account{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := store.UpdateAccount(ctx, "acme", func(a *registry.Account) error {
				a.Name += string(rune('a' + i))
				return nil
			})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("a change that lost the race: %v", err)
		}
	}
	a, err := store.Account(ctx, "acme")
	if err != nil || len(a.Name) != n {
		t.Fatalf("after %d changes: %+v %v", n, a, err)
	}
}
