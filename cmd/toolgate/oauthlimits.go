package main

import (
	"github.com/spf13/pflag"

	"github.com/toolgate/toolgate/oauth"
)

// oauthLimitsEnv maps the authorization server's limits to the variables that set them.
var oauthLimitsEnv = map[string]string{
	"oauth-max-clients":              "TOOLGATE_OAUTH_MAX_CLIENTS",
	"oauth-registrations-per-minute": "TOOLGATE_OAUTH_REGISTRATIONS_PER_MINUTE",
	"oauth-max-pending":              "TOOLGATE_OAUTH_MAX_PENDING",
	"oauth-max-pending-per-source":   "TOOLGATE_OAUTH_MAX_PENDING_PER_SOURCE",
}

// addOAuthLimitFlags are the limits on what strangers make the deployment's own
// authorization server keep, before anyone signs in.
func addOAuthLimitFlags(f *pflag.FlagSet, l *oauth.Limits) {
	f.IntVar(&l.MaxClients, "oauth-max-clients", l.MaxClients, "dynamically registered OAuth clients (RFC 7591) the deployment holds at once; past it a registration is refused with 403 access_denied (pre-registered clients and client ID metadata documents are not counted)")
	f.IntVar(&l.RegistrationsPerMinute, "oauth-registrations-per-minute", l.RegistrationsPerMinute, "dynamic client registrations one source address may make in a minute on one edge; past it 429 temporarily_unavailable with Retry-After")
	f.IntVar(&l.MaxPending, "oauth-max-pending", l.MaxPending, "OAuth authorization requests in progress (awaiting sign-in, consent or the code's exchange, "+oauth.RequestLifetime.String()+" at most each) the deployment holds at once; past it a new one is answered temporarily_unavailable")
	f.IntVar(&l.MaxPendingPerSource, "oauth-max-pending-per-source", l.MaxPendingPerSource, "OAuth authorization requests in progress one source address (the TCP peer: no proxy header is trusted) may hold across the deployment; past it that address's new ones are answered temporarily_unavailable, others' still taken")
}
