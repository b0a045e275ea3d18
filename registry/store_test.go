package registry_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

func TestLinks(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx := env.Store, env.Ctx
	view := env.View
	signer := env.Signer

	if _, err := store.CreateAccount(ctx, registry.Account{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	if err := store.PutTool(ctx, registry.Tool{ID: "echo", Methods: []registry.Method{{Name: "echo"}}}); err != nil {
		t.Fatal(err)
	}
	conn, err := store.Connect(ctx, "acme", "echo", signer)
	if err != nil {
		t.Fatal(err)
	}
	token := signer.Token("acme", "echo", conn.LinkNonce)

	t.Run("a new link reaches its one tool", func(t *testing.T) {
		// The view follows each bucket on its own: the link may show before the tool.
		testenv.WaitFor(t, "link authenticates and the tool is in the view", func() bool {
			_, err := view.Snapshot().AuthenticateLink(token)
			return err == nil && view.Snapshot().RawTool("echo") != nil
		})
		p, _ := view.Snapshot().AuthenticateLink(token)
		if p.Account != "acme" || p.Tool != "echo" {
			t.Fatalf("principal %+v, want acme/echo", p)
		}
		if _, err := view.Snapshot().Tool(p, "echo"); err != nil {
			t.Fatalf("tool through its link: %v", err)
		}
	})
	t.Run("connecting twice is refused", func(t *testing.T) {
		if _, err := store.Connect(ctx, "acme", "echo", signer); !errors.Is(err, registry.ErrExists) {
			t.Fatalf("got %v, want ErrExists", err)
		}
	})
	t.Run("a rotated link is dead and the new one works", func(t *testing.T) {
		c, err := store.RotateLink(ctx, "acme", "echo", signer)
		if err != nil {
			t.Fatal(err)
		}
		fresh := signer.Token("acme", "echo", c.LinkNonce)
		if fresh == token {
			t.Fatal("rotation kept the token")
		}
		testenv.WaitFor(t, "old link refused, new accepted", func() bool {
			_, errOld := view.Snapshot().AuthenticateLink(token)
			_, errNew := view.Snapshot().AuthenticateLink(fresh)
			return errors.Is(errOld, registry.ErrUnauthenticated) && errNew == nil
		})
		token = fresh
	})
	t.Run("disconnecting kills the link and hides the tool", func(t *testing.T) {
		if err := store.Disconnect(ctx, "acme", "echo", signer); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, "link refused and tool hidden", func() bool {
			s := view.Snapshot()
			_, errLink := s.AuthenticateLink(token)
			_, errTool := s.Tool(registry.Principal{Account: "acme"}, "echo")
			return errors.Is(errLink, registry.ErrUnauthenticated) && errors.Is(errTool, registry.ErrToolNotFound)
		})
	})
}

func TestKeyScopesAndExpiry(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx := env.Store, env.Ctx
	view := env.View
	signer := env.Signer

	store.CreateAccount(ctx, registry.Account{ID: "acme"})
	for _, id := range []string{"a", "b"} {
		store.PutTool(ctx, registry.Tool{ID: id, Methods: []registry.Method{{Name: "m"}}})
		store.Connect(ctx, "acme", id, signer)
	}
	// The view is asked at a time of the test's choosing, so the key's expiry need not
	// come while the test runs: one that did could pass before a loaded machine's view
	// had the key at all.
	soon := time.Now().Add(time.Hour)
	_, scoped, err := store.CreateKey(ctx, registry.NewKeyRequest{Account: "acme", Scopes: []string{"a"}, ExpiresAt: &soon})
	if err != nil {
		t.Fatal(err)
	}
	var p registry.Principal
	testenv.WaitFor(t, "key authenticates", func() bool {
		p, err = view.Snapshot().AuthenticateKey(scoped, time.Now())
		s := view.Snapshot()
		return err == nil && s.RawTool("b") != nil && s.Connection("acme", "b") != nil
	})
	if n := len(view.Snapshot().Tools(p)); n != 1 {
		t.Errorf("a key scoped to one tool lists %d tools", n)
	}
	if _, err := view.Snapshot().Tool(p, "b"); !errors.Is(err, registry.ErrForbidden) {
		t.Errorf("tool outside scopes: got %v, want ErrForbidden", err)
	}
	if _, err := view.Snapshot().Tool(p, "nope"); !errors.Is(err, registry.ErrToolNotFound) {
		t.Errorf("unknown tool: got %v, want ErrToolNotFound", err)
	}
	if _, err := view.Snapshot().AuthenticateKey(scoped, soon.Add(time.Millisecond)); !errors.Is(err, registry.ErrUnauthenticated) {
		t.Errorf("expired key: got %v, want ErrUnauthenticated", err)
	}
	past := time.Now().Add(-time.Second)
	if _, _, err := store.CreateKey(ctx, registry.NewKeyRequest{Account: "acme", ExpiresAt: &past}); !errors.Is(err, registry.ErrInvalid) {
		t.Errorf("key expiring in the past: got %v, want ErrInvalid", err)
	}
	if _, _, err := store.CreateKey(ctx, registry.NewKeyRequest{Account: "ghost"}); !errors.Is(err, registry.ErrInvalid) {
		t.Errorf("key for a missing account: got %v, want ErrInvalid", err)
	}
}

func TestConcurrentUpdatesAreNotLost(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx := env.Store, env.Ctx
	store.CreateAccount(ctx, registry.Account{ID: "acme"})

	const writers = 8
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			if _, err := store.UpdateAccount(ctx, "acme", func(a *registry.Account) error {
				a.Limits.Burst++
				return nil
			}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	a, err := store.Account(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if a.Limits.Burst != writers {
		t.Fatalf("burst %d after %d concurrent increments: an update was lost", a.Limits.Burst, writers)
	}
}

func TestDeleteAccountTakesItsKeysAndLinks(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx := env.Store, env.Ctx
	view := env.View
	signer := env.Signer

	store.CreateAccount(ctx, registry.Account{ID: "acme"})
	store.PutTool(ctx, registry.Tool{ID: "echo", Methods: []registry.Method{{Name: "echo"}}})
	conn, _ := store.Connect(ctx, "acme", "echo", signer)
	_, key, _ := store.CreateKey(ctx, registry.NewKeyRequest{Account: "acme"})
	if err := store.DeleteAccount(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "key and link refused", func() bool {
		s := view.Snapshot()
		_, errKey := s.AuthenticateKey(key, time.Now())
		_, errLink := s.AuthenticateLink(signer.Token("acme", "echo", conn.LinkNonce))
		return errKey != nil && errLink != nil && len(s.Keys("acme")) == 0
	})
	if err := store.DeleteAccount(ctx, "acme"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("deleting twice: got %v, want ErrNotFound", err)
	}
}

func TestClusterSurvivesLosingANode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3-node clusters")
	}
	for _, which := range []string{"the client's own node", "another node"} {
		t.Run("losing "+which+" leaves the registry readable, writable and followed", func(t *testing.T) {
			c := testenv.NewCluster(t)
			nc := testenv.Conn(t, c.URL())
			store := testenv.Store(t, nc, 3)
			view := testenv.View(t, store)
			ctx := testenv.Context(t)

			if _, err := store.CreateAccount(ctx, registry.Account{ID: "before"}); err != nil {
				t.Fatal(err)
			}
			for i, s := range c.Servers {
				if (s.ClientURL() == nc.ConnectedUrl()) == (which == "the client's own node") {
					c.Stop(i)
					break
				}
			}
			start := time.Now()
			testenv.WaitFor(t, "registry writable after losing a node", func() bool {
				attempt, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				_, err := store.CreateAccount(attempt, registry.Account{ID: "after"})
				return err == nil || errors.Is(err, registry.ErrExists)
			})
			t.Logf("writable again %v after the node stopped", time.Since(start))
			if a, err := store.Account(ctx, "before"); err != nil || a.ID != "before" {
				t.Fatalf("reading a record written before the loss: %v", err)
			}
			testenv.WaitFor(t, "view follows writes after the loss", func() bool {
				return view.Snapshot().Account("after") != nil
			})
			t.Logf("view caught up %v after the node stopped", time.Since(start))
		})
	}
}

// TestAnEndedSessionStaysEnded: a session deleted while a request of it was under way
// on another edge is not brought back by that request's refresh.
func TestAnEndedSessionStaysEnded(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx := env.Store, env.Ctx
	sess := registry.Session{ID: registry.NewID(""), Account: "acme", Tool: "echo", CreatedAt: time.Now().UTC()}
	if rev, err := store.CreateSession(ctx, sess); err != nil || rev == 0 {
		t.Fatalf("CreateSession: revision %d, %v", rev, err)
	}
	if _, err := store.CreateSession(ctx, sess); !errors.Is(err, registry.ErrExists) {
		t.Fatalf("creating a session whose id is taken: %v, want ErrExists", err)
	}
	got, err := store.UpdateSession(ctx, sess.ID, func(s *registry.Session) error { s.LogLevel = "debug"; return nil })
	if err != nil || got.LogLevel != "debug" || got.Account != "acme" {
		t.Fatalf("UpdateSession: %+v, %v", got, err)
	}
	if err := store.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := store.UpdateSession(ctx, sess.ID, func(*registry.Session) error { return nil }); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("refreshing a deleted session: %v, want ErrNotFound", err)
	}
	if s, err := store.Session(ctx, sess.ID); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("the deleted session after a refresh: %+v, %v; want it still gone", s, err)
	}
}

// TestASessionWrittenWithALifeOfItsOwn: a session written with IdleExpiry expires
// that long after its last write, well before the bucket's TTL; each write with it
// starts the time again, and one that says a stream is open gives the session the
// bucket's TTL.
func TestASessionWrittenWithALifeOfItsOwn(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx := env.Store, env.Ctx
	const life = 2 * time.Second
	gone := func(id string) bool {
		_, err := store.Session(ctx, id)
		return errors.Is(err, registry.ErrNotFound)
	}

	short := registry.Session{ID: registry.NewID(""), Account: "acme", Tool: "echo", CreatedAt: time.Now().UTC()}
	if _, err := store.CreateSession(ctx, short, registry.IdleExpiry(life)); err != nil {
		t.Fatal(err)
	}
	// Refreshed twice within its life, it outlives the first life by far.
	for range 3 {
		time.Sleep(life / 2)
		if _, err := store.UpdateSession(ctx, short.ID, func(*registry.Session) error { return nil }, registry.IdleExpiry(life)); err != nil {
			t.Fatalf("refreshing the session at %v: %v", life/2, err)
		}
	}
	testenv.WaitFor(t, "the session left alone expired", func() bool { return gone(short.ID) })

	long := registry.Session{ID: registry.NewID(""), Account: "acme", Tool: "echo", CreatedAt: time.Now().UTC()}
	if _, err := store.CreateSession(ctx, long, registry.IdleExpiry(life)); err != nil {
		t.Fatal(err)
	}
	if _, err := store.UpdateSession(ctx, long.ID, func(s *registry.Session) error { s.Stream = true; return nil }, registry.IdleExpiry(life)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * life)
	if gone(long.ID) {
		t.Fatalf("a session last written with its stream open expired after %v; the bucket's TTL is %v", 3*life, store.Options().SessionTTL)
	}
}
