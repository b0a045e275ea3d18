package main

import (
	"context"
	"errors"
	"net/url"
	"time"

	"github.com/spf13/pflag"

	"github.com/toolgate/toolgate/oauth"
)

// oidcOptions put the edge's links and MCP endpoints behind the deployment's own
// OpenID provider: its access tokens are the ones taken, and the built-in
// authorization server is off (one issuer per deployment, so a client's RFC 9207
// and issuer checks see the one its metadata names).
type oidcOptions struct {
	oauth.ExternalConfig
	DiscoverWait time.Duration // how long the start waits for the discovery document
}

func defaultOIDCOptions() oidcOptions {
	return oidcOptions{ExternalConfig: oauth.ExternalConfig{AccountClaim: "toolgate_account", UserClaim: "sub",
		KeysMinRefetch: 10 * time.Second, KeysMaxAge: time.Hour}, DiscoverWait: 30 * time.Second}
}

// oidcEnv maps the identity provider's flags to the variables that set them.
var oidcEnv = map[string]string{
	"oidc-issuer":           "TOOLGATE_OIDC_ISSUER",
	"oidc-account-claim":    "TOOLGATE_OIDC_ACCOUNT_CLAIM",
	"oidc-user-claim":       "TOOLGATE_OIDC_USER_CLAIM",
	"oidc-audience":         "TOOLGATE_OIDC_AUDIENCE",
	"oidc-keys-min-refetch": "TOOLGATE_OIDC_KEYS_MIN_REFETCH",
	"oidc-keys-max-age":     "TOOLGATE_OIDC_KEYS_MAX_AGE",
	"oidc-discover-wait":    "TOOLGATE_OIDC_DISCOVER_WAIT",
	"oidc-accept-jwt-typ":   "TOOLGATE_OIDC_ACCEPT_JWT_TYP",
}

func addOIDCFlags(f *pflag.FlagSet, o *oidcOptions) {
	f.StringVar(&o.Issuer, "oidc-issuer", o.Issuer, "the deployment's OpenID provider (its issuer URL): links and /tools/{tool}/mcp take its access tokens, their metadata names it, and the built-in authorization server is off (empty: the built-in one)")
	f.StringVar(&o.AccountClaim, "oidc-account-claim", o.AccountClaim, "the access token claim whose value is the account a token is for (a token for a link of another account is refused)")
	f.StringVar(&o.UserClaim, "oidc-user-claim", o.UserClaim, "the access token claim whose value names the user who signed in")
	f.StringVar(&o.Audience, "oidc-audience", o.Audience, "an audience an access token may carry instead of the resource's URL, for a provider without resource indicators (RFC 8707) (empty: the resource's URL only)")
	f.DurationVar(&o.KeysMinRefetch, "oidc-keys-min-refetch", o.KeysMinRefetch, "how long after a fetch of the provider's key set a token naming a key it lacks may make the edge fetch it again (such tokens are refused until then)")
	f.DurationVar(&o.KeysMaxAge, "oidc-keys-max-age", o.KeysMaxAge, "how long the edge trusts a fetched key set before it fetches it anew (a key the provider removed is refused after)")
	f.BoolVar(&o.AcceptJWTTyp, "oidc-accept-jwt-typ", o.AcceptJWTTyp, "take access tokens whose typ header is JWT, for a provider that labels them so instead of at+jwt (RFC 9068); one carrying an ID token's nonce or at_hash is still refused (off: only at+jwt, application/at+jwt or no typ)")
	f.DurationVar(&o.DiscoverWait, "oidc-discover-wait", o.DiscoverWait, "how long the edge's start waits for the provider's discovery document before it fails")
}

func (o oidcOptions) validate(signInOff bool) error {
	if o.Issuer == "" {
		return nil
	}
	if signInOff {
		return errors.New("edge: oidc-issuer: not with --no-sign-in")
	}
	if u, err := url.Parse(o.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return errors.New("edge: oidc-issuer: must be an http(s) URL")
	}
	if o.AccountClaim == "" || o.UserClaim == "" {
		return errors.New("edge: oidc-account-claim, oidc-user-claim: required with --oidc-issuer")
	}
	if o.KeysMaxAge < time.Minute {
		return errors.New("edge: oidc-keys-max-age: must be at least 1m0s")
	}
	if o.KeysMinRefetch < 0 || o.KeysMinRefetch >= o.KeysMaxAge {
		return errors.New("edge: oidc-keys-min-refetch: must not be negative, and below oidc-keys-max-age")
	}
	if o.DiscoverWait < time.Second {
		return errors.New("edge: oidc-discover-wait: must be at least 1s")
	}
	return nil
}

// openIdP discovers the deployment's OpenID provider; nil without --oidc-issuer.
func openIdP(ctx context.Context, o oidcOptions) (*oauth.External, error) {
	if o.Issuer == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.DiscoverWait)
	defer cancel()
	return oauth.DiscoverExternal(ctx, o.ExternalConfig)
}
