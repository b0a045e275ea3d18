package registry_test

import (
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
