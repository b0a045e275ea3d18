package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/edge/dashboard"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

// signInOptions are the edge's OAuth settings: its links and MCP endpoints are
// protected resources whose tokens the deployment issues itself (package oauth).
type signInOptions struct {
	Off         bool          // links stay bearer URLs whatever an account says
	KeyRotation time.Duration // how long a signing key signs before the next replaces it
	TokenTTL    time.Duration // how long an access token is good for
	Limits      oauth.Limits  // what strangers may make the authorization server keep
	IdP         oidcOptions   // the deployment's OpenID provider instead (oidc.go)
}

func defaultSignInOptions() signInOptions {
	return signInOptions{KeyRotation: 30 * 24 * time.Hour, TokenTTL: time.Hour, Limits: oauth.DefaultLimits(), IdP: defaultOIDCOptions()}
}

// signInEnv maps the sign-in flags to the variables that set them.
var signInEnv = map[string]string{
	"no-sign-in":         "TOOLGATE_NO_SIGN_IN",
	"oauth-key-rotation": "TOOLGATE_OAUTH_KEY_ROTATION",
	"oauth-token-ttl":    "TOOLGATE_OAUTH_TOKEN_TTL",
}

func addSignInFlags(f *pflag.FlagSet, o *signInOptions) {
	f.BoolVar(&o.Off, "no-sign-in", o.Off, "no OAuth: links stay bearer URLs (an account's require_sign_in has no effect) and /tools/{tool}/mcp takes API keys only")
	f.DurationVar(&o.KeyRotation, "oauth-key-rotation", o.KeyRotation, "how long a token signing key signs before a new one replaces it (the previous one still verifies); the same on every edge")
	f.DurationVar(&o.TokenTTL, "oauth-token-ttl", o.TokenTTL, "how long an access token the deployment issues is good for (a client refreshes it after)")
	addOIDCFlags(f, &o.IdP)
}

func (o signInOptions) validate() error {
	if err := o.IdP.validate(o.Off); err != nil {
		return err
	}
	if o.Off {
		return nil
	}
	if o.KeyRotation < time.Hour {
		return errors.New("edge: oauth-key-rotation: must be at least 1h0m0s")
	}
	if o.TokenTTL < time.Second || o.TokenTTL > 24*time.Hour {
		return errors.New("edge: oauth-token-ttl: must be between 1s and 24h0m0s")
	}
	if err := o.Limits.Validate(); err != nil {
		return fmt.Errorf("edge: %w", err)
	}
	return nil
}

// openSignIn is the edge's token issuer and authorization server (whose sign-in and
// consent pages are the dashboard's: none without it), nil when sign-in is off.
// Behind the deployment's OpenID provider (--oidc-issuer) there is neither.
// Its signing keys are stored sealed under the credentials keyring when the edge has
// one (nil: plain, with a warning).
func openSignIn(ctx context.Context, o signInOptions, store *registry.Store, view *registry.View, keyring *credentials.Keyring,
	baseURL string, dashboardOn bool, log *slog.Logger) (*oauth.Issuer, *oauth.Server, error) {
	if o.Off || o.IdP.Issuer != "" {
		return nil, nil, nil
	}
	if keyring == nil {
		log.Warn("edge: no --credentials-key-file: the OAuth token signing keys this edge makes are stored unencrypted in " + oauth.KeyBucket)
	}
	keys, err := oauth.OpenKeys(ctx, store, o.KeyRotation, keyring)
	if err != nil {
		return nil, nil, err
	}
	is := oauth.NewIssuer(strings.TrimSuffix(baseURL, "/"), keys)
	if err := is.CheckRevocations(ctx, store, view); err != nil {
		return nil, nil, err
	}
	if !dashboardOn {
		return is, nil, nil
	}
	login := strings.TrimSuffix(baseURL, "/") + edge.DashboardPath + dashboard.ConsentPath + "?id="
	srv, err := oauth.NewServer(ctx, store, is, oauth.ServerConfig{
		TokenTTL: o.TokenTTL,
		LoginURL: func(id string) string { return login + url.QueryEscape(id) },
		Limits:   o.Limits,
	})
	if err != nil {
		return nil, nil, err
	}
	return is, srv, nil
}
