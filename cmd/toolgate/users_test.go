package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestUsersFromTheCLI: `toolgate users` makes a user with a secret (printed once) and
// one with a subject, lists them without a secret, refuses a name that could name
// other state and a user past the account's bound (set through its variable, so at
// its edge: the bound's user is made, the next refused), and deletes one.
func TestUsersFromTheCLI(t *testing.T) {
	srv := testenv.Server(t)
	t.Setenv("TOOLGATE_MAX_USERS_PER_ACCOUNT", "2")
	url, _ := startEdge(t, srv.ClientURL())
	admin := func(args ...string) string {
		t.Helper()
		return admin(t, url, args...)
	}
	admin("accounts", "create", "acme")
	var ana edge.NewUser
	if err := json.Unmarshal([]byte(admin("users", "add", "acme", "ana")), &ana); err != nil ||
		ana.Name != "ana" || ana.Kind != "secret" || !strings.HasPrefix(ana.Secret, "tgu_") {
		t.Fatalf("users add: %+v %v", ana, err)
	}
	var bo edge.NewUser
	if err := json.Unmarshal([]byte(admin("users", "add", "acme", "bo", "--subject", "idp|bo")), &bo); err != nil ||
		bo.Kind != "subject" || bo.Subject != "idp|bo" || bo.Secret != "" {
		t.Fatalf("users add --subject: %+v %v", bo, err)
	}
	if _, err := run(t, context.Background(), "users", "add", "acme", "carl", "--url", url); err == nil || !strings.Contains(err.Error(), "at most 2") {
		t.Fatalf("a third user with TOOLGATE_MAX_USERS_PER_ACCOUNT=2: %v", err)
	}
	if _, err := run(t, context.Background(), "users", "add", "acme", "a.b", "--url", url); err == nil || !strings.Contains(err.Error(), "user name") {
		t.Fatalf("users add a.b: %v", err)
	}
	got := admin("users", "list", "acme")
	var list edge.UserList
	if err := json.Unmarshal([]byte(got), &list); err != nil || len(list.Users) != 2 || strings.Contains(got, ana.Secret) || strings.Contains(got, "sha256") {
		t.Fatalf("users list:\n%s", got)
	}
	if got := admin("accounts", "show", "acme"); strings.Contains(got, "sha256") || !strings.Contains(got, `"ana"`) {
		t.Fatalf("accounts show:\n%s", got)
	}
	admin("users", "delete", "acme", "ana")
	if got := admin("users", "list", "acme"); strings.Contains(got, `"ana"`) {
		t.Fatalf("users list after delete:\n%s", got)
	}
	if _, err := run(t, context.Background(), "users", "delete", "acme", "ana", "--url", url); err == nil {
		t.Fatal("deleting ana twice succeeded")
	}
}
