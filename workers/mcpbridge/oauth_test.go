package mcpbridge_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testidp"
	"github.com/toolgate/toolgate/workers/mcpbridge"
)

// protectedServer is a go-sdk MCP server behind the go-sdk's bearer-token check,
// whose protected resource metadata names as, served at metadataPath.
func protectedServer(t *testing.T, as, metadataPath string, challenge bool) (serverURL string) {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	server := mcp.NewServer(&mcp.Implementation{Name: "calendar", Version: "1"}, nil)
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	refuse := func(context.Context, string, *http.Request) (*auth.TokenInfo, error) {
		return nil, auth.ErrInvalidToken
	}
	opts := &auth.RequireBearerTokenOptions{}
	if challenge {
		opts.ResourceMetadataURL = srv.URL + metadataPath
	}
	mux.Handle("/mcp", auth.RequireBearerToken(refuse, opts)(handler))
	resource := srv.URL + "/mcp"
	if metadataPath == "/.well-known/oauth-protected-resource" {
		resource = srv.URL
	}
	mux.Handle(metadataPath, auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{Resource: resource,
		AuthorizationServers: []string{as}, ScopesSupported: []string{"openid", "offline_access"}}))
	return srv.URL + "/mcp"
}

// TestDiscoverOAuth: for a remote MCP server that requires OAuth (the go-sdk's
// bearer check, an OpenID provider as its authorization server), the bridge finds the
// provider through the WWW-Authenticate challenge or the well-known URLs, and the
// provider it declares passes the record's checks: the server as the resource
// indicator, the endpoints from the authorization server's metadata, the
// pre-registered client where the server takes neither client documents nor
// registration, and an error saying so without one.
func TestDiscoverOAuth(t *testing.T) {
	idp := testidp.Start(t, testidp.Options{ClientID: "toolgate", ClientSecret: "s", RedirectURI: "http://127.0.0.1:9/oauth/callback"})
	ctx := testenv.Context(t)
	client := mcpbridge.OAuthClient{GatewayURL: "http://127.0.0.1:9", ClientID: "toolgate", HTTP: &http.Client{Timeout: testenv.Patience}}
	for name, place := range map[string]struct {
		path      string
		challenge bool
	}{
		"named by the challenge":         {"/meta/calendar", true},
		"at the well-known path":         {"/.well-known/oauth-protected-resource/mcp", false},
		"at the root's well-known place": {"/.well-known/oauth-protected-resource", false},
	} {
		t.Run(name, func(t *testing.T) {
			serverURL := protectedServer(t, idp.Issuer, place.path, place.challenge)
			p, err := mcpbridge.DiscoverOAuth(ctx, serverURL, client)
			if err != nil {
				t.Fatal(err)
			}
			if p.Issuer != idp.Issuer || !strings.HasPrefix(p.AuthorizationURL, idp.Issuer) || !strings.HasPrefix(p.TokenURL, idp.Issuer) ||
				p.ClientID != "toolgate" || !slices.Contains(p.Scopes, "offline_access") || !strings.HasPrefix(serverURL, p.Resource) {
				t.Fatalf("discovered %+v", p)
			}
			if err := wire.CheckConnection(&wire.Connection{OAuth: p}); err != nil {
				t.Fatalf("the provider does not pass the record's checks: %v", err)
			}
		})
	}
	serverURL := protectedServer(t, idp.Issuer, "/meta/calendar", true)
	client.ClientID = ""
	if _, err := mcpbridge.DiscoverOAuth(ctx, serverURL, client); err == nil || !strings.Contains(err.Error(), "registered") {
		t.Fatalf("no client: %v; want an error asking for the pre-registered client", err)
	}
	open := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(open.Close)
	if _, err := mcpbridge.DiscoverOAuth(ctx, open.URL, client); err == nil || errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "not 401") {
		t.Fatalf("a server that asks for no token: %v", err)
	}
}

// TestDiscoverOAuthAfterAnOpenInitialize: a server that answers initialize without
// a token and requires one from the next request on is found through the challenge
// to the tools/list a client sends next; the provider carries the ways the
// authorization server's token endpoint takes clients.
func TestDiscoverOAuthAfterAnOpenInitialize(t *testing.T) {
	idp := testidp.Start(t, testidp.Options{ClientID: "toolgate", ClientSecret: "s", RedirectURI: "http://127.0.0.1:9/oauth/callback"})
	ctx := testenv.Context(t)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	server := mcp.NewServer(&mcp.Implementation{Name: "calendar", Version: "1"}, nil)
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	refuse := func(context.Context, string, *http.Request) (*auth.TokenInfo, error) {
		return nil, auth.ErrInvalidToken
	}
	guarded := auth.RequireBearerToken(refuse, &auth.RequireBearerTokenOptions{ResourceMetadataURL: srv.URL + "/meta"})(handler)
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"initialize"`)) {
			handler.ServeHTTP(w, r)
			return
		}
		guarded.ServeHTTP(w, r)
	})
	mux.Handle("/meta", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{Resource: srv.URL + "/mcp",
		AuthorizationServers: []string{idp.Issuer}}))
	client := mcpbridge.OAuthClient{GatewayURL: "http://127.0.0.1:9", ClientID: "toolgate", HTTP: &http.Client{Timeout: testenv.Patience}}
	p, err := mcpbridge.DiscoverOAuth(ctx, srv.URL+"/mcp", client)
	if err != nil {
		t.Fatal(err)
	}
	if p.Issuer != idp.Issuer || p.ClientID != "toolgate" || p.Resource != srv.URL+"/mcp" || len(p.TokenAuthMethods) == 0 {
		t.Fatalf("discovered %+v", p)
	}
}
