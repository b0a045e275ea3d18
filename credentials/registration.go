package credentials

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// A provider whose record names no client (no client ID metadata document, no
// client the deployment registered) but a registration endpoint gets a client the
// gateway registers there itself (RFC 7591), once for all edges: the first edge to
// need it registers and keeps the registration, its secret included, enveloped in
// the vault as values are; another edge that registered at the same moment keeps
// the one stored first. A registration serves only the issuer it was made at: when
// the tool's provider moves to another authorization server, the gateway registers
// there again rather than show the old server's client to the new one.

// registeredAccount keeps the clients the gateway registered, under a name no
// account can take (account ids start with a letter or digit).
const registeredAccount = "_registered"

// oauthClient is the client the gateway is at a tool's provider.
type oauthClient struct {
	id, secret string
	method     string // its token endpoint authentication (RFC 7591); "" for unknown
}

// clientOf is the gateway's client at t's provider: the one the record names, with
// the secret the deployment set for it, or else the one the gateway registered.
func (v *Vault) clientOf(ctx context.Context, t *wire.Tool) (oauthClient, error) {
	p := t.Connection.OAuth
	if p.ClientID != "" {
		secret, err := v.ClientSecret(ctx, t.ID)
		return oauthClient{id: p.ClientID, secret: secret}, err
	}
	for {
		r, rev, err := v.Read(ctx, registeredAccount, t.ID)
		if err != nil && !errors.Is(err, registry.ErrNotFound) {
			return oauthClient{}, err
		}
		if r != nil {
			values, err := v.keys.open(&r.Envelope, registeredAccount, t.ID)
			if err != nil {
				return oauthClient{}, err
			}
			if values["issuer"] == p.Issuer && values["registration_url"] == p.RegistrationURL {
				return oauthClient{id: values["client_id"], secret: values["client_secret"], method: values["method"]}, nil
			}
		}
		c, err := v.register(ctx, p)
		if err != nil {
			return oauthClient{}, err
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		if r == nil {
			r = &Record{Account: registeredAccount, Tool: t.ID}
		}
		r.Fields = map[string]FieldState{"client_secret": {SetAt: now}}
		r.UpdatedAt = now
		values := map[string]string{"client_id": c.id, "client_secret": c.secret, "method": c.method,
			"issuer": p.Issuer, "registration_url": p.RegistrationURL}
		if err := v.write(ctx, r, values, rev); errors.Is(err, errConflict) {
			continue // another edge registered first: its client serves
		} else if err != nil {
			return oauthClient{}, err
		}
		return c, nil
	}
}

// register registers a client of the gateway at p's registration endpoint: a web
// application whose redirect URI is the gateway's callback, authenticating at the
// token endpoint in a way p takes.
func (v *Vault) register(ctx context.Context, p *wire.OAuthProvider) (oauthClient, error) {
	method := registrationMethod(p.TokenAuthMethods)
	reg, err := oauthex.RegisterClient(ctx, p.RegistrationURL, &oauthex.ClientRegistrationMetadata{
		RedirectURIs: []string{v.oauth.cfg.RedirectURL}, TokenEndpointAuthMethod: method, ApplicationType: "web",
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"}, ClientName: "toolgate"},
		v.oauth.cfg.HTTPClient)
	if err != nil {
		return oauthClient{}, fmt.Errorf("credentials: oauth: register a client at %s: %w", p.RegistrationURL, err)
	}
	if reg.TokenEndpointAuthMethod != "" {
		method = reg.TokenEndpointAuthMethod
	}
	return oauthClient{id: reg.ClientID, secret: reg.ClientSecret, method: method}, nil
}

// registrationMethod is the token endpoint authentication the gateway registers
// with, among those the provider takes: a secret in the Authorization header, else
// in the form, else none (a public client); RFC 8414's default when none are named.
func registrationMethod(supported []string) string {
	if len(supported) == 0 {
		return "client_secret_basic"
	}
	for _, m := range []string{"client_secret_basic", "client_secret_post", "none"} {
		if slices.Contains(supported, m) {
			return m
		}
	}
	return "client_secret_basic"
}

// authStyle is how c authenticates at the token endpoint of a provider that takes
// supported: as it registered; a public client names itself in the form (PKCE
// proves it); a client with a secret in the header where the provider says it
// takes that, else in the form where it says so, else as oauth2 finds out (the
// header first).
func (c oauthClient) authStyle(supported []string) oauth2.AuthStyle {
	switch {
	case c.secret == "" || c.method == "none" || c.method == "client_secret_post":
		return oauth2.AuthStyleInParams
	case c.method == "client_secret_basic", slices.Contains(supported, "client_secret_basic"):
		return oauth2.AuthStyleInHeader
	case slices.Contains(supported, "client_secret_post"):
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleAutoDetect
}
