package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
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
	// the bridge registers a client there (dynamic client registration).
	ClientID string
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
	if err != nil {
		return nil, err
	}
	asm, err := auth.GetAuthServerMetadata(ctx, prm.AuthorizationServers[0], c.HTTP)
	if err != nil || asm == nil {
		return nil, fmt.Errorf("mcp: oauth: the metadata of authorization server %s: %v", prm.AuthorizationServers[0], err)
	}
	p := &wire.OAuthProvider{Issuer: asm.Issuer, AuthorizationURL: asm.AuthorizationEndpoint, TokenURL: asm.TokenEndpoint,
		Scopes: prm.ScopesSupported, Resource: prm.Resource, IssResponse: asm.AuthorizationResponseIssParameterSupported}
	for _, ch := range challenges {
		if s := ch.Params["scope"]; ch.Scheme == "bearer" && s != "" {
			p.Scopes = strings.Fields(s)
		}
	}
	if p.ClientID, err = c.clientID(ctx, asm); err != nil {
		return nil, err
	}
	return p, nil
}

// challenge asks the server for what an unauthorized client gets: a 401 and its
// WWW-Authenticate challenges (none from a server that names no metadata there).
func challenge(ctx context.Context, serverURL string, hc *http.Client) ([]oauthex.Challenge, error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"toolgate","version":"1"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL, strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("mcp: oauth: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("mcp: oauth: ask %s: %w", serverURL, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		return nil, fmt.Errorf("mcp: oauth: %s answers %s without a token, not 401: it asks for no authorization", serverURL, res.Status)
	}
	return oauthex.ParseWWWAuthenticate(res.Header.Values("WWW-Authenticate"))
}

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
	return nil, fmt.Errorf("mcp: oauth: no protected resource metadata for %s: %w", serverURL, errors.Join(errs...))
}

// clientID is the gateway's client id at the authorization server asm describes.
func (c OAuthClient) clientID(ctx context.Context, asm *oauthex.AuthServerMeta) (string, error) {
	base := strings.TrimRight(c.GatewayURL, "/")
	switch {
	case asm.ClientIDMetadataDocumentSupported && base != "":
		return base + wire.OAuthClientPath, nil
	case c.ClientID != "":
		return c.ClientID, nil
	case asm.RegistrationEndpoint != "" && base != "":
		reg, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{base + wire.OAuthCallbackPath}, TokenEndpointAuthMethod: "none",
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"}, ClientName: "toolgate"}, c.HTTP)
		if err != nil {
			return "", fmt.Errorf("mcp: oauth: register a client at %s: %w", asm.Issuer, err)
		}
		return reg.ClientID, nil
	}
	return "", fmt.Errorf("mcp: oauth: %s takes no client ID metadata document and no registration: give the client the deployment registered there", asm.Issuer)
}
