package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/oauth"
)

// TestOAuthClientsFromTheCLI: `toolgate oauth-clients` adds a confidential client
// (its secret printed once), lists it without the secret, refuses a bad one naming
// what is wrong, and deletes it; and the limits the edge is started with through
// their variables hold at its registration endpoint.
func TestOAuthClientsFromTheCLI(t *testing.T) {
	srv := testenv.Server(t)
	t.Setenv("TOOLGATE_OAUTH_MAX_CLIENTS", "1")
	url, _ := startEdge(t, srv.ClientURL())
	admin := func(args ...string) string {
		t.Helper()
		return admin(t, url, args...)
	}
	var added oauth.NewClient
	if err := json.Unmarshal([]byte(admin("oauth-clients", "add", "desk", "--name", "Desk", "--redirect-uri", "http://127.0.0.1:9/cb", "--confidential")), &added); err != nil ||
		added.ID != "desk" || !strings.HasPrefix(added.Secret, "tgs_") {
		t.Fatalf("oauth-clients add: %+v %v", added, err)
	}
	var list edge.OAuthClientList
	got := admin("oauth-clients", "list")
	if err := json.Unmarshal([]byte(got), &list); err != nil || len(list.Clients) != 1 || !list.Clients[0].Confidential || strings.Contains(got, added.Secret) {
		t.Fatalf("oauth-clients list:\n%s", got)
	}
	if _, err := run(t, context.Background(), "oauth-clients", "add", "tgc_x", "--redirect-uri", "http://127.0.0.1:9/cb", "--url", url); err == nil ||
		!strings.Contains(err.Error(), "/client_id:") {
		t.Fatalf("oauth-clients add tgc_x: %v", err)
	}
	if got := admin("oauth-clients", "delete", "desk"); !strings.Contains(got, "done") {
		t.Fatalf("oauth-clients delete:\n%s", got)
	}
	if got := admin("oauth-clients", "list"); !strings.Contains(got, `"clients": []`) {
		t.Fatalf("oauth-clients list after delete:\n%s", got)
	}

	register := func() int {
		resp, err := http.Post(url+"/oauth/register", "application/json", strings.NewReader(`{"redirect_uris":["http://127.0.0.1:9/cb"],"token_endpoint_auth_method":"none"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := register(); s != http.StatusCreated {
		t.Fatalf("the first registration: %d", s)
	}
	if s := register(); s != http.StatusForbidden {
		t.Fatalf("a second registration with TOOLGATE_OAUTH_MAX_CLIENTS=1: %d, want 403", s)
	}
}
