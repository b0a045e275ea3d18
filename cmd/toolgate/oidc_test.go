package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testidp"
)

// TestEdgeBehindAnIdP: `toolgate edge` with TOOLGATE_OIDC_ISSUER (as an operator
// sets it) discovers the provider at its start; the metadata of a tool's MCP
// endpoint names the provider alone, and the built-in authorization server is off.
// Flags at their bounds start; past them, with --no-sign-in, or with a provider
// that cannot be discovered as that issuer, the edge refuses to start.
func TestEdgeBehindAnIdP(t *testing.T) {
	idp := testidp.Start(t, testidp.Options{ClientID: "c", ClientSecret: "s", RedirectURI: "http://127.0.0.1/cb", JWTAccessTokens: true})
	srv := testenv.Server(t)
	t.Setenv("TOOLGATE_OIDC_ISSUER", idp.Issuer)
	t.Setenv("TOOLGATE_OIDC_ACCEPT_JWT_TYP", "true")
	url, _ := startEdge(t, srv.ClientURL(), "--oidc-keys-max-age", "1m", "--oidc-keys-min-refetch", "0s", "--oidc-discover-wait", "1s")
	resp, err := http.Get(url + "/.well-known/oauth-protected-resource/tools/kit/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	err = json.NewDecoder(resp.Body).Decode(&meta)
	resp.Body.Close()
	if err != nil || meta.Resource != url+"/tools/kit/mcp" || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != idp.Issuer {
		t.Fatalf("metadata %+v %v: want the endpoint and the provider alone", meta, err)
	}
	if resp, err := http.Get(url + "/.well-known/oauth-authorization-server"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the built-in server's metadata behind a provider: %v %v, want 404", resp, err)
	}

	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	nobody := "http://" + closed.Addr().String()
	closed.Close()
	sec := newDeploymentSecrets(t)
	base := []string{"edge", "--nats", srv.ClientURL(), "--link-secret-file", sec.linkSecretFile, "--listen", "127.0.0.1:0"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--no-sign-in"}, "edge: oidc-issuer: not with --no-sign-in"},
		{[]string{"--oidc-issuer", "idp.example"}, "edge: oidc-issuer: must be an http(s) URL"},
		{[]string{"--oidc-account-claim", ""}, "edge: oidc-account-claim, oidc-user-claim: required"},
		{[]string{"--oidc-keys-max-age", "59s"}, "edge: oidc-keys-max-age: must be at least 1m0s"},
		{[]string{"--oidc-keys-min-refetch", "-1s"}, "edge: oidc-keys-min-refetch: must not be negative"},
		{[]string{"--oidc-keys-min-refetch", "1h"}, "edge: oidc-keys-min-refetch: must not be negative, and below oidc-keys-max-age"},
		{[]string{"--oidc-discover-wait", "999ms"}, "edge: oidc-discover-wait: must be at least 1s"},
		{[]string{"--oidc-issuer", nobody, "--oidc-discover-wait", "1s"}, "oauth: discover " + nobody},
		// The provider answers as 127.0.0.1: named otherwise, it is not the issuer.
		{[]string{"--oidc-issuer", strings.Replace(idp.Issuer, "127.0.0.1", "localhost", 1)}, "issuer does not match"},
	} {
		if _, err := run(t, context.Background(), append(base, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("toolgate edge %s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}
