package registry_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestViewHoldsAnAnnouncedRevocationUntilItsBucketHasIt: a revocation heard on the
// bus is refused at once, before the bucket shows anything of it, and held only until
// the view's follower has applied the revision it names. Here the announcement names
// a revision the bucket reaches without revoking the key, so the key is accepted again
// once the follower is past it: what refused it was the announcement alone.
func TestViewHoldsAnAnnouncedRevocationUntilItsBucketHasIt(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx, view := env.Store, env.Ctx, env.View
	if _, err := store.CreateAccount(ctx, registry.Account{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	_, secret, err := store.CreateKey(ctx, registry.NewKeyRequest{Account: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	accepts := func() bool {
		_, err := view.Snapshot().AuthenticateKey(secret, time.Now())
		return err == nil
	}
	testenv.WaitFor(t, "the view takes the key", accepts)
	keys, err := store.Keys(ctx, "acme")
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys: %v %v", keys, err)
	}
	_, rev, err := registry.ReadLatest(ctx, store.JetStream(), registry.BucketKeys, registry.Hash(secret))
	if err != nil {
		t.Fatal(err)
	}

	if err := store.Announce(ctx, registry.Revocation{Kind: registry.RevokedKey, ID: registry.Hash(secret),
		Bucket: registry.BucketKeys, Revision: rev + 1}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the view refuses the announced key", func() bool { return !accepts() })
	if _, err := view.Snapshot().AuthenticateKeyID(keys[registry.Hash(secret)].ID, "", "acme", time.Now()); !errors.Is(err, registry.ErrUnauthenticated) {
		t.Fatalf("the key by id: %v, want ErrUnauthenticated", err)
	}

	// The next write of the bucket is revision rev+1: the hold ends there.
	if _, _, err := store.CreateKey(ctx, registry.NewKeyRequest{Account: "acme"}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the view takes the key again once its follower has the revision", accepts)
}

// TestViewRefusesWhatAnAccountsRevocationNames: an account's revocation refuses its
// keys and links, a connection's the link and the tool, before the buckets show it.
func TestViewRefusesWhatAnAccountsRevocationNames(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx, view := env.Store, env.Ctx, env.View
	if _, err := store.CreateAccount(ctx, registry.Account{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	_, secret, err := store.CreateKey(ctx, registry.NewKeyRequest{Account: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := store.Connect(ctx, "acme", "echo", env.Signer)
	if err != nil {
		t.Fatal(err)
	}
	link := env.Signer.Token("acme", "echo", c.LinkNonce)
	testenv.WaitFor(t, "the view takes the key and the link", func() bool {
		_, kerr := view.Snapshot().AuthenticateKey(secret, time.Now())
		_, lerr := view.Snapshot().AuthenticateLink(link)
		return kerr == nil && lerr == nil
	})

	// Revisions far ahead: only the announcements can refuse.
	const ahead = 1 << 40
	if err := store.Announce(ctx, registry.Revocation{Kind: registry.RevokedConnection, ID: "acme.echo",
		Bucket: registry.BucketConnections, Revision: ahead}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the view refuses the removed connection's link", func() bool {
		_, err := view.Snapshot().AuthenticateLink(link)
		return err != nil
	})
	if _, err := view.Snapshot().AuthenticateKey(secret, time.Now()); err != nil {
		t.Fatalf("the account's key, its account not revoked: %v", err)
	}
	if err := store.Announce(ctx, registry.Revocation{Kind: registry.RevokedAccount, ID: "acme",
		Bucket: registry.BucketAccounts, Revision: ahead}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the view refuses the deleted account's key", func() bool {
		_, err := view.Snapshot().AuthenticateKey(secret, time.Now())
		return err != nil
	})
}

// TestARevocationNoBucketHoldsEndsAtItsEnd: the hook for revocations kept elsewhere
// (an OAuth token): held by kind and id until Until.
func TestARevocationNoBucketHoldsEndsAtItsEnd(t *testing.T) {
	env := testenv.NewRegistry(t)
	until := time.Now().Add(time.Second)
	if err := env.Store.Announce(env.Ctx, registry.Revocation{Kind: "oauth-token", ID: "t1", Until: until}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the view holds the token's revocation", func() bool { return env.View.Snapshot().Revoked("oauth-token", "t1") })
	if env.View.Snapshot().Revoked("oauth-token", "t2") {
		t.Fatal("another token is revoked too")
	}
	testenv.WaitFor(t, "the revocation ends at its end", func() bool {
		return time.Now().After(until) && !env.View.Snapshot().Revoked("oauth-token", "t1")
	})
}

// TestConfirmAsksTheLeaderWhileBehind: an edge whose follower is behind (it may have
// missed an announcement while its connection was down) checks the keys it accepts
// against the bucket's leader: a key revoked there is refused though the view, which
// heard nothing, still holds it usable.
func TestConfirmAsksTheLeaderWhileBehind(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx, view := env.Store, env.Ctx, env.View
	if _, err := store.CreateAccount(ctx, registry.Account{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	_, secret, err := store.CreateKey(ctx, registry.NewKeyRequest{Account: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	hash := registry.Hash(secret)
	testenv.WaitFor(t, "the view takes the key", func() bool {
		_, err := view.Snapshot().AuthenticateKey(secret, time.Now())
		return err == nil
	})
	if err := view.Confirm(ctx, registry.RevokedKey, hash); err != nil {
		t.Fatalf("a current view confirms what it holds: %v", err)
	}
	registry.MarkBehind(view, registry.BucketKeys, true)
	if err := view.Confirm(ctx, registry.RevokedKey, hash); err != nil {
		t.Fatalf("the leader holds the key usable: %v", err)
	}
	if err := view.Confirm(ctx, registry.RevokedKey, registry.Hash(secret+"x")); !errors.Is(err, registry.ErrUnauthenticated) {
		t.Fatalf("a key the leader does not hold: %v, want ErrUnauthenticated", err)
	}

	// Revoked in the bucket behind the view's back: a record written as the store
	// writes it, with no announcement.
	b, rev, err := registry.ReadLatest(ctx, store.JetStream(), registry.BucketKeys, hash)
	if err != nil {
		t.Fatal(err)
	}
	var k registry.Key
	if err := json.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	k.RevokedAt = &now
	b, _ = json.Marshal(k)
	kv, err := store.JetStream().KeyValue(ctx, registry.BucketKeys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Update(ctx, hash, b, rev); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the leader's answer refuses the revoked key once the last one is stale", func() bool {
		// The real follower, which does bring the write here, says it is current
		// again each time it has delivered all there was.
		registry.MarkBehind(view, registry.BucketKeys, true)
		return errors.Is(view.Confirm(ctx, registry.RevokedKey, hash), registry.ErrUnauthenticated)
	})
	registry.MarkBehind(view, registry.BucketKeys, false)
	if err := view.Confirm(ctx, registry.RevokedKey, hash); err != nil {
		t.Fatalf("a current view leaves the decision to its snapshot: %v", err)
	}
}

// TestACredentialMadeWhileBehindIsAccepted: a key or link made while the edge's
// follower is behind (its consumer being made again after a NATS node's loss) is not
// in the edge's view yet. The edge asks the leader and accepts it, rather than
// refusing for seconds a key its own POST /admin/keys just returned, and from then on
// holds it (an admin change finds it by id). A made-up key or link is still refused,
// and so is a key revoked since.
func TestACredentialMadeWhileBehindIsAccepted(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx := env.Store, env.Ctx
	view, err := registry.NewViewNotFollowing(ctx, store, testenv.Logger(t), registry.BucketKeys, registry.BucketLinks)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateAccount(ctx, registry.Account{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	c, err := store.Connect(ctx, "acme", "echo", env.Signer)
	if err != nil {
		t.Fatal(err)
	}
	token := env.Signer.Token("acme", "echo", c.LinkNonce)
	k, secret, err := store.CreateKey(ctx, registry.NewKeyRequest{Account: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the view holds the account and its connection", func() bool {
		return view.Snapshot().Account("acme") != nil && view.Snapshot().Connection("acme", "echo") != nil
	})
	if _, err := view.Snapshot().AuthenticateKey(secret, time.Now()); !errors.Is(err, registry.ErrUnauthenticated) {
		t.Fatalf("the view's snapshot holds a key of a bucket it does not follow: %v", err)
	}

	p, err := view.AuthenticateKey(ctx, secret, time.Now())
	if err != nil || p.Account != "acme" || p.Key == nil || p.Key.ID != k.ID {
		t.Fatalf("the key the leader holds: %+v, %v; want acme's key %s", p, err, k.ID)
	}
	if p, err := view.AuthenticateLink(ctx, token); err != nil || p.Account != "acme" || p.Tool != "echo" {
		t.Fatalf("the link the leader holds: %+v, %v; want acme's echo", p, err)
	}
	testenv.WaitFor(t, "the view holds what it learned", func() bool {
		snap := view.Snapshot()
		_, held := snap.KeyByID(k.ID)
		_, err := snap.AuthenticateLink(token)
		return held != nil && err == nil
	})
	for _, made := range []string{secret + "x", "tgk_made_up"} {
		if _, err := view.AuthenticateKey(ctx, made, time.Now()); !errors.Is(err, registry.ErrUnauthenticated) {
			t.Fatalf("a key the leader does not hold: %v, want ErrUnauthenticated", err)
		}
	}
	if _, err := view.AuthenticateLink(ctx, token+"x"); !errors.Is(err, registry.ErrUnauthenticated) {
		t.Fatalf("a link the leader does not hold: %v, want ErrUnauthenticated", err)
	}

	// Revoked: refused, by the announcement the view heard or by the record the
	// leader holds (the view, behind, confirms what it holds), whichever comes first.
	if _, err := store.RevokeKey(ctx, registry.Hash(secret)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the revoked key is refused", func() bool {
		_, err := view.AuthenticateKey(ctx, secret, time.Now())
		return errors.Is(err, registry.ErrUnauthenticated)
	})
}
