package registry_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestUsersSignInToTheirAccountOnly: a user made with a secret signs in with it, to
// its own account only; a wrong secret, another account's name or a deleted user is
// refused; and the account's record keeps the secret's hash, never the secret.
func TestUsersSignInToTheirAccountOnly(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx, view := env.Store, env.Ctx, env.View
	for _, id := range []string{"acme", "globex"} {
		if _, err := store.CreateAccount(ctx, registry.Account{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	u, secret, err := store.AddUser(ctx, "acme", "ana", "", registry.DefaultMaxUsers)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, registry.UserSecretPrefix) || u.SecretHash != registry.Hash(secret) || u.Kind() != "secret" {
		t.Fatalf("user %+v, secret %q", u, secret)
	}
	if _, _, err := store.AddUser(ctx, "globex", "bo", "", registry.DefaultMaxUsers); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the view has the user", func() bool { return view.Snapshot().User("acme", "ana") != nil })

	snap := view.Snapshot()
	p, got, err := snap.AuthenticateUser("acme", "ana", secret)
	if err != nil || p.Account != "acme" || p.User != "ana" || p.Key != nil || got.ID != u.ID {
		t.Fatalf("sign-in: %+v %+v %v", p, got, err)
	}
	for _, c := range []struct{ account, name, secret string }{
		{"acme", "ana", secret + "x"},
		{"acme", "ana", ""},
		{"globex", "ana", secret}, // the name is acme's
		{"acme", "bo", secret},    // bo is globex's
		{"nobody", "ana", secret},
	} {
		if _, _, err := snap.AuthenticateUser(c.account, c.name, c.secret); !errors.Is(err, registry.ErrUnauthenticated) {
			t.Errorf("%s/%s: %v, want ErrUnauthenticated", c.account, c.name, err)
		}
	}
	if _, _, err := store.AddUser(ctx, "acme", "ana", "", registry.DefaultMaxUsers); !errors.Is(err, registry.ErrExists) {
		t.Errorf("ana again: %v, want ErrExists", err)
	}
	a, err := store.Account(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if pub := a.Public(); pub.Users[0].SecretHash != "" || a.Users[0].SecretHash == "" {
		t.Errorf("public %+v, stored %+v", pub.Users, a.Users)
	}

	if _, err := store.DeleteUser(ctx, "acme", "ana"); err != nil {
		t.Fatal(err)
	}
	// The view follows the bucket: the deletion reaches it shortly after the write.
	testenv.WaitFor(t, "the view has lost the user", func() bool { return view.Snapshot().User("acme", "ana") == nil })
	if _, _, err := view.Snapshot().AuthenticateUser("acme", "ana", secret); !errors.Is(err, registry.ErrUnauthenticated) {
		t.Fatalf("deleted: %v, want ErrUnauthenticated", err)
	}
	if _, err := store.DeleteUser(ctx, "acme", "ana"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("deleted twice: %v, want ErrNotFound", err)
	}
}

// TestUserNamesAndTheirBound: names that could name other state are refused, and an
// account takes as many users as its bound and not one more.
func TestUserNamesAndTheirBound(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx := env.Store, env.Ctx
	if _, err := store.CreateAccount(ctx, registry.Account{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "a.b", "a*", "a>", "a b", "a\x00", "a\n", "é", strings.Repeat("a", 65)} {
		if _, _, err := store.AddUser(ctx, "acme", name, "", 5); !errors.Is(err, registry.ErrInvalid) {
			t.Errorf("name %q: %v, want ErrInvalid", name, err)
		}
	}
	if _, _, err := store.AddUser(ctx, "acme", "ana", "sub\x01", 5); !errors.Is(err, registry.ErrInvalid) {
		t.Errorf("a subject with a control character: %v, want ErrInvalid", err)
	}
	if _, _, err := store.AddUser(ctx, "nobody", "ana", "", 5); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("no account: %v, want ErrNotFound", err)
	}
	if _, _, err := store.AddUser(ctx, "acme", "ana", "", 2); err != nil {
		t.Fatal(err)
	}
	u, secret, err := store.AddUser(ctx, "acme", "idp-user", "auth0|42", 2)
	if err != nil || secret != "" || u.Kind() != "subject" {
		t.Fatalf("by subject: %+v %q %v", u, secret, err)
	}
	if _, _, err := store.AddUser(ctx, "acme", "third", "", 2); !errors.Is(err, registry.ErrTooManyUsers) {
		t.Fatalf("past the bound: %v, want ErrTooManyUsers", err)
	}
	a, err := store.Account(ctx, "acme")
	if err != nil || len(a.Users) != 2 {
		t.Fatalf("after the refusal: %+v %v", a, err)
	}
}
