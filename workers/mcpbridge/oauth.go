package mcpbridge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolgate/toolgate/bus/wire"
)

// OAuthClient is what the bridge knows of the gateway as an OAuth client of a remote
// server's authorization server.
type OAuthClient struct {
	// GatewayURL is the deployment's base URL: its callback is the redirect URI, its
	// client ID metadata document the client id where the authorization server
	// takes such documents.
	GatewayURL string
	// ClientID is a client the deployment registered at the authorization server
	// beforehand, used where it takes no client ID metadata document; without one,
	// the edges register a client there (dynamic client registration).
	ClientID string
	// MetadataURL is where the deployment publishes its client ID metadata
	// document when not at the gateway ({GatewayURL}/oauth/client): an address the
	// authorization servers can fetch (the gateway's may be private).
	MetadataURL string
	// HTTP talks to the server and its authorization server.
	HTTP *http.Client
}

// DiscoverOAuth finds, as the MCP authorization specification says, the provider
// at which each account authorizes the remote server at serverURL: the protected
// resource metadata named by the server's WWW-Authenticate challenge or found at the
// well-known URLs, its authorization server's metadata (RFC 8414 or OpenID
// discovery), and the client: the gateway's client ID metadata document where the
// server takes it, else the pre-registered client, else one registered dynamically.
// The provider carries the server's URL as the resource indicator, the scopes the
// challenge (or else the metadata) names, and whether the authorization server
// sends its issuer in its responses (RFC 9207).
func DiscoverOAuth(ctx context.Context, serverURL string, c OAuthClient) (*wire.OAuthProvider, error) {
	challenges, err := challenge(ctx, serverURL, c.HTTP)
	if err != nil {
		return nil, err
	}
	prm, err := resourceMetadata(ctx, serverURL, challenges, c.HTTP)
	if errors.Is(err, errNoResourceMetadata) {
		return c.legacy(ctx, serverURL, challenges)
	}
	if err != nil {
		return nil, err
	}
	asm, err := auth.GetAuthServerMetadata(ctx, prm.AuthorizationServers[0], c.HTTP)
	if err != nil || asm == nil {
		return nil, fmt.Errorf("mcp: oauth: the metadata of authorization server %s: %v", prm.AuthorizationServers[0], err)
	}
	p := &wire.OAuthProvider{Scopes: prm.ScopesSupported, Resource: prm.Resource}
	p.Scopes = challengedScopes(challenges, p.Scopes)
	return p, c.describe(p, asm)
}

// describe fills p from the authorization server's metadata asm: its endpoints, its
// issuer and whether it sends it (RFC 9207), how its token endpoint takes clients,
// and the gateway's client there.
func (c OAuthClient) describe(p *wire.OAuthProvider, asm *oauthex.AuthServerMeta) error {
	p.Issuer, p.AuthorizationURL, p.TokenURL = asm.Issuer, asm.AuthorizationEndpoint, asm.TokenEndpoint
	p.IssResponse, p.TokenAuthMethods = asm.AuthorizationResponseIssParameterSupported, asm.TokenEndpointAuthMethodsSupported
	var err error
	p.ClientID, p.RegistrationURL, err = c.client(asm)
	return err
}

// challengedScopes are the scopes a bearer challenge names, else scopes.
func challengedScopes(challenges []oauthex.Challenge, scopes []string) []string {
	for _, ch := range challenges {
		if s := ch.Params["scope"]; ch.Scheme == "bearer" && s != "" {
			scopes = strings.Fields(s)
		}
	}
	return scopes
}

// legacy is the provider of a server that publishes no protected resource metadata,
// as the MCP authorization specification of 2025-03-26 has it: the server's origin
// is its authorization server, with metadata at the origin's RFC 8414 well-known
// URL, or else its endpoints at the origin's /authorize, /token and /register.
func (c OAuthClient) legacy(ctx context.Context, serverURL string, challenges []oauthex.Challenge) (*wire.OAuthProvider, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("mcp: oauth: %w", err)
	}
	origin := u.Scheme + "://" + u.Host
	p := &wire.OAuthProvider{Scopes: challengedScopes(challenges, nil)}
	asm, err := auth.GetAuthServerMetadata(ctx, origin, c.HTTP)
	if err != nil {
		return nil, fmt.Errorf("mcp: oauth: no protected resource metadata for %s, and the metadata of %s: %w", serverURL, origin, err)
	}
	if asm == nil {
		asm = &oauthex.AuthServerMeta{AuthorizationEndpoint: origin + "/authorize", TokenEndpoint: origin + "/token", RegistrationEndpoint: origin + "/register"}
	}
	return p, c.describe(p, asm)
}

// challenge asks the server for what an unauthorized client gets: a 401 and its
// WWW-Authenticate challenges (none from a server that names no metadata there).
// A server may take the initialize from anyone and require a token from the next
// request on: it is asked the tools/list a client sends next.
func challenge(ctx context.Context, serverURL string, hc *http.Client) ([]oauthex.Challenge, error) {
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"toolgate","version":"1"}}}`
	res, err := ask(ctx, hc, serverURL, initialize, nil)
	if err == nil && res.StatusCode != http.StatusUnauthorized {
		list := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` +
			StatelessRevision + `","io.modelcontextprotocol/clientCapabilities":{}}}}`
		h := http.Header{"Mcp-Protocol-Version": {StatelessRevision}}
		if id := res.Header.Get("Mcp-Session-Id"); id != "" {
			h.Set("Mcp-Session-Id", id)
		}
		res, err = ask(ctx, hc, serverURL, list, h)
	}
	if err != nil {
		return nil, fmt.Errorf("mcp: oauth: ask %s: %w", serverURL, err)
	}
	if res.StatusCode != http.StatusUnauthorized {
		return nil, fmt.Errorf("mcp: oauth: %s answers %s without a token, not 401: it asks for no authorization", serverURL, res.Status)
	}
	return oauthex.ParseWWWAuthenticate(res.Header.Values("WWW-Authenticate"))
}

// ask posts the JSON-RPC request body to serverURL with header h, and reads the
// answer's body away.
func ask(ctx context.Context, hc *http.Client, serverURL, body string, h http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	maps.Copy(req.Header, h)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
	res.Body.Close()
	return res, nil
}

// errNoResourceMetadata: the server publishes no protected resource metadata
// (every well-known URL answers 4xx, and its challenge names none).
var errNoResourceMetadata = errors.New("mcp: oauth: no protected resource metadata")

// absent reports whether err is the SDK's answer to a metadata URL that answered
// 4xx (its status error is not exported).
func absent(err error) bool { return err != nil && strings.Contains(err.Error(), "bad status 4") }

// resourceMetadata is the server's protected resource metadata (RFC 9728): at the
// challenge's resource_metadata, else at the well-known URL with the server's path,
// else at the root's.
func resourceMetadata(ctx context.Context, serverURL string, challenges []oauthex.Challenge, hc *http.Client) (*oauthex.ProtectedResourceMetadata, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("mcp: oauth: %w", err)
	}
	type place struct{ metadata, resource string }
	var places []place
	for _, ch := range challenges {
		if m := ch.Params["resource_metadata"]; m != "" {
			places = append(places, place{m, serverURL})
		}
	}
	root := *u
	root.Path, root.RawQuery = "", ""
	withPath := root
	withPath.Path = "/.well-known/oauth-protected-resource/" + strings.TrimLeft(u.Path, "/")
	atRoot := root
	atRoot.Path = "/.well-known/oauth-protected-resource"
	places = append(places, place{withPath.String(), serverURL}, place{atRoot.String(), root.String()})
	var errs []error
	named := len(places) > 2
	for _, p := range places {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, p.metadata, p.resource, hc)
		if err != nil || prm == nil {
			errs = append(errs, err)
			continue
		}
		if len(prm.AuthorizationServers) == 0 {
			return nil, fmt.Errorf("mcp: oauth: %s names no authorization server", p.metadata)
		}
		return prm, nil
	}
	if !named && !slices.ContainsFunc(errs, func(err error) bool { return !absent(err) }) {
		return nil, errNoResourceMetadata
	}
	return nil, fmt.Errorf("mcp: oauth: no protected resource metadata for %s: %w", serverURL, errors.Join(errs...))
}

// client is the gateway's client at the authorization server asm describes: its
// client ID metadata document's URL where the server takes such documents, else
// the client the deployment registered there, else none but the server's
// registration endpoint, where the edges register one (its secret stays with them).
func (c OAuthClient) client(asm *oauthex.AuthServerMeta) (id, registration string, err error) {
	base := strings.TrimRight(c.GatewayURL, "/")
	switch {
	case asm.ClientIDMetadataDocumentSupported && c.MetadataURL != "":
		return c.MetadataURL, "", nil
	case asm.ClientIDMetadataDocumentSupported && base != "":
		return base + wire.OAuthClientPath, "", nil
	case c.ClientID != "":
		return c.ClientID, "", nil
	case asm.RegistrationEndpoint != "":
		return "", asm.RegistrationEndpoint, nil
	}
	return "", "", fmt.Errorf("mcp: oauth: %s takes no client ID metadata document and no registration: give the client the deployment registered there", cmp.Or(asm.Issuer, asm.AuthorizationEndpoint))
}
