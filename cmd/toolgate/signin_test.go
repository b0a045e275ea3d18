package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestEdgeSignInFlags: an edge at the bounds of its sign-in flags serves its
// authorization server's metadata as the issuer at its base URL; one with
// --no-sign-in serves none.
func TestEdgeSignInFlags(t *testing.T) {
	srv := testenv.Server(t)
	url, _ := startEdge(t, srv.ClientURL(), "--oauth-token-ttl", "1s", "--oauth-key-rotation", "1h")
	resp, err := http.Get(url + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Issuer string `json:"issuer"`
	}
	err = json.NewDecoder(resp.Body).Decode(&meta)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || meta.Issuer != url {
		t.Fatalf("metadata: %d %+v %v, want the issuer %s", resp.StatusCode, meta, err, url)
	}
	startEdge(t, srv.ClientURL(), "--oauth-token-ttl", "24h", "--oauth-key-rotation", "1h") // the other bound: it starts (and is ready)
	// An edge that would rotate on another period than the keys' refuses to start.
	sec := newDeploymentSecrets(t)
	_, err = run(t, context.Background(), "edge", "--nats", srv.ClientURL(), "--link-secret-file", sec.linkSecretFile,
		"--listen", "127.0.0.1:0", "--oauth-key-rotation", "2h")
	if err == nil || !strings.Contains(err.Error(), "--oauth-key-rotation must be the same on every edge") {
		t.Fatalf("an edge with another key rotation: %v", err)
	}
	off, _ := startEdge(t, testenv.Server(t).ClientURL(), "--no-sign-in")
	resp, err = http.Get(off + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an edge without sign-in answers its metadata %d, want 404", resp.StatusCode)
	}
}
