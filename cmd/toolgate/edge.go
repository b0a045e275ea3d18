package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/asks"
	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/busauth"
	"github.com/toolgate/toolgate/calls"
	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/edge/dashboard"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/payloads"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/sse"
)

// edgeOptions is what `toolgate edge` runs with: the edge's and the gateway's
// configurations and where to find NATS and the deployment's secrets.
type edgeOptions struct {
	Edge           edge.Config
	Gateway        gateway.Config
	NATS           string
	NATSAuth       bus.ClientAuth
	Replicas       int  // 0: the registry's own (see workerConfig.Replicas)
	UpdateRegistry bool // change existing buckets to Replicas instead of refusing
	WriteWait      time.Duration
	RevokeAttempt  time.Duration // registry.Options.RevokeAttempt
	ConfirmWait    time.Duration // registry.Options.ConfirmWait
	LinkSecretFile string
	AdminKeyFile   string
	// CredentialsKeyFile holds the key-encryption keys of the connections' values
	// (package credentials); empty: this edge keeps none.
	CredentialsKeyFile string
	credentialKeys     *credentials.Keyring    // read from CredentialsKeyFile
	OAuth              credentials.OAuthConfig // the OAuth connections, with credentials
	Dashboard          bool                    // serve the deployment dashboard under /dashboard/
	EdgeRates          bool                    // keep rate limits per edge instead of in the shared buckets
	Wait               time.Duration
	MCP                sse.Config
	Calls              calls.Config
	// AskConcurrency bounds the workers' asks this edge works on at once (asks.Serve).
	AskConcurrency int
	// NoAudit keeps no audit trail; Audit is the trail's retention otherwise (the
	// subjects and replicas are the registry's).
	NoAudit bool
	Audit   audit.Options
	// Approvals configures the calls held for a person's approval.
	Approvals approvals.Config
	SignIn    signInOptions
}

// replicasUsage describes the edge's --replicas.
const replicasUsage = "replicas of the registry's buckets: 1 on a single node, 3 in a cluster; unset, as the buckets are (1 when creating them), and a number that differs from theirs stops the process"

func defaultEdgeOptions() edgeOptions {
	return edgeOptions{Edge: edge.DefaultConfig(), Gateway: gateway.DefaultConfig(), MCP: sse.DefaultConfig(),
		Calls: calls.Config{Subjects: wire.DefaultSubjects}, Approvals: approvals.DefaultConfig(),
		NATS: "nats://127.0.0.1:4222", Dashboard: true, AskConcurrency: asks.DefaultConcurrency,
		OAuth: credentials.DefaultOAuthConfig(""), SignIn: defaultSignInOptions()}
}

// Validate names the first field that is wrong. An empty base URL is taken from the
// address the edge listens on.
func (o edgeOptions) Validate() error {
	if err := o.SignIn.validate(); err != nil {
		return err
	}
	if o.Edge.MaxUsers < 1 {
		return errors.New("edge: max-users-per-account: must be at least 1")
	}
	if o.NATS == "" {
		return errors.New("edge: nats: required")
	}
	for _, u := range strings.Split(o.NATS, ",") {
		p, err := url.Parse(strings.TrimSpace(u))
		if err != nil || p.Host == "" || !slices.Contains([]string{"nats", "tls", "ws", "wss"}, p.Scheme) {
			return fmt.Errorf("edge: nats: %q: must be a nats://host:port URL", u)
		}
	}
	if o.LinkSecretFile == "" {
		return errors.New("edge: link-secret-file: required; every edge of a deployment reads the same secret (at least 32 bytes)")
	}
	if o.Wait < 0 {
		return errors.New("edge: wait: must not be negative")
	}
	if o.WriteWait < 0 {
		return errors.New("edge: registry-write-wait: must not be negative")
	}
	if o.RevokeAttempt < 0 {
		return errors.New("edge: revoke-attempt: must not be negative")
	}
	if o.ConfirmWait < 0 {
		return errors.New("edge: revocation-check-wait: must not be negative")
	}
	if o.Replicas < 0 || o.Replicas > 5 {
		return errors.New("edge: replicas: must be from 1 to 5, or 0 for the registry's own")
	}
	if o.AskConcurrency < 1 {
		return errors.New("edge: ask-concurrency: must be at least 1")
	}
	switch {
	case o.OAuth.FlowLifetime < time.Minute:
		return errors.New("edge: oauth-flow-lifetime: must be at least 1m0s")
	case o.OAuth.RefreshBefore < 0:
		return errors.New("edge: oauth-refresh-before: must not be negative")
	case o.OAuth.RefreshLease < time.Second:
		return errors.New("edge: oauth-refresh-lease: must be at least 1s")
	}
	if o.UpdateRegistry && o.Replicas == 0 && o.MCP.EventRetention == 0 && o.Audit.MaxAge == 0 && o.Audit.MaxBytes == 0 && o.Calls.TTL == 0 {
		return errors.New("edge: update-registry: needs --replicas, --mcp-event-retention, --audit-max-age, --audit-max-bytes or --calls-ttl, the settings to change to")
	}
	if err := o.Audit.Validate(); err != nil {
		return fmt.Errorf("edge: %w", err)
	}
	if err := o.Gateway.Validate(); err != nil {
		return err
	}
	if err := o.validateCalls(); err != nil {
		return err
	}
	if err := o.Approvals.Validate(); err != nil {
		return fmt.Errorf("edge: %w", err)
	}
	if err := o.MCP.Validate(); err != nil {
		return err
	}
	cfg := o.Edge
	if cfg.BaseURL == "" {
		cfg.BaseURL = "http://127.0.0.1"
	}
	return cfg.Validate()
}

// validateCalls checks the calls that outlive their request against what keeps them:
// a record must outlive its call, and a worker's credentials let it answer a call for
// busauth.ReplyWindow only.
func (o edgeOptions) validateCalls() error {
	if o.Calls.TTL < 0 {
		return errors.New("edge: calls-ttl: must not be negative")
	}
	if o.Calls.TTL != 0 && o.Calls.TTL <= o.Gateway.AsyncMaxTimeout {
		return fmt.Errorf("edge: calls-ttl: must be longer than async-max-timeout (%v): a call's record must outlive the call", o.Gateway.AsyncMaxTimeout)
	}
	if o.Gateway.AsyncMaxTimeout > busauth.ReplyWindow {
		return fmt.Errorf("edge: async-max-timeout: must be at most %v, the time a worker's credentials allow it to answer a call", busauth.ReplyWindow)
	}
	return nil
}

// localURL is the URL of a listener on this machine: the edge's base URL when none is
// given.
func localURL(addr net.Addr) string {
	host, port, _ := net.SplitHostPort(addr.String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// edgeEnv maps each flag of `toolgate edge` to the variable that sets it.
var edgeEnv = map[string]string{
	"nats":                      "TOOLGATE_NATS",
	"listen":                    "TOOLGATE_LISTEN",
	"base-url":                  "TOOLGATE_BASE_URL",
	"link-secret-file":          "TOOLGATE_LINK_SECRET_FILE",
	"admin-key-file":            "TOOLGATE_ADMIN_KEY_FILE",
	"credentials-key-file":      "TOOLGATE_CREDENTIALS_KEY_FILE",
	"oauth-flow-lifetime":       "TOOLGATE_OAUTH_FLOW_LIFETIME",
	"oauth-refresh-before":      "TOOLGATE_OAUTH_REFRESH_BEFORE",
	"oauth-refresh-lease":       "TOOLGATE_OAUTH_REFRESH_LEASE",
	"replicas":                  "TOOLGATE_REPLICAS",
	"wait":                      "TOOLGATE_WAIT",
	"update-registry":           "TOOLGATE_UPDATE_REGISTRY",
	"registry-write-wait":       "TOOLGATE_REGISTRY_WRITE_WAIT",
	"revoke-attempt":            "TOOLGATE_REVOKE_ATTEMPT",
	"revocation-check-wait":     "TOOLGATE_REVOCATION_CHECK_WAIT",
	"max-body-bytes":            "TOOLGATE_MAX_BODY_BYTES",
	"max-users-per-account":     "TOOLGATE_MAX_USERS_PER_ACCOUNT",
	"max-payload-bytes":         "TOOLGATE_MAX_PAYLOAD_BYTES",
	"default-timeout":           "TOOLGATE_DEFAULT_TIMEOUT",
	"max-timeout":               "TOOLGATE_MAX_TIMEOUT",
	"async-max-timeout":         "TOOLGATE_ASYNC_MAX_TIMEOUT",
	"calls-ttl":                 "TOOLGATE_CALLS_TTL",
	"rate":                      "TOOLGATE_RATE",
	"burst":                     "TOOLGATE_BURST",
	"edge-rates":                "TOOLGATE_EDGE_RATES",
	"shutdown-timeout":          "TOOLGATE_SHUTDOWN_TIMEOUT",
	"drain-delay":               "TOOLGATE_DRAIN_DELAY",
	"ask-concurrency":           "TOOLGATE_ASK_CONCURRENCY",
	"call-lost-after":           "TOOLGATE_CALL_LOST_AFTER",
	"read-header-timeout":       "TOOLGATE_READ_HEADER_TIMEOUT",
	"read-body-timeout":         "TOOLGATE_READ_BODY_TIMEOUT",
	"dashboard":                 "TOOLGATE_DASHBOARD",
	"mcp-keep-alive":            "TOOLGATE_MCP_KEEP_ALIVE",
	"mcp-listen-tasks":          "TOOLGATE_MCP_LISTEN_TASKS",
	"mcp-max-sessions":          "TOOLGATE_MCP_MAX_SESSIONS",
	"mcp-session-idle":          "TOOLGATE_MCP_SESSION_IDLE",
	"mcp-event-retention":       "TOOLGATE_MCP_EVENT_RETENTION",
	"mcp-allowed-origins":       "TOOLGATE_MCP_ALLOWED_ORIGINS",
	"mcp-allowed-hosts":         "TOOLGATE_MCP_ALLOWED_HOSTS",
	"no-audit":                  "TOOLGATE_NO_AUDIT",
	"audit-max-age":             "TOOLGATE_AUDIT_MAX_AGE",
	"audit-max-bytes":           "TOOLGATE_AUDIT_MAX_BYTES",
	"approval-expiry":           "TOOLGATE_APPROVAL_EXPIRY",
	"approval-max-expiry":       "TOOLGATE_APPROVAL_MAX_EXPIRY",
	"approval-webhook":          "TOOLGATE_APPROVAL_WEBHOOK",
	"approval-webhook-timeout":  "TOOLGATE_APPROVAL_WEBHOOK_TIMEOUT",
	"approval-webhook-attempts": "TOOLGATE_APPROVAL_WEBHOOK_ATTEMPTS",
}

func newEdgeCmd() *cobra.Command {
	o := defaultEdgeOptions()
	cmd := &cobra.Command{
		Use:   "edge",
		Short: "Run one stateless HTTP edge node",
		Long: `Run one stateless HTTP edge node: get-tools, tool calls, the direct tool API and
the admin API, over a NATS server or cluster that holds the registry.

Every flag can be set by a TOOLGATE_* variable instead (TOOLGATE_NATS,
TOOLGATE_LISTEN, TOOLGATE_BASE_URL, TOOLGATE_LINK_SECRET_FILE, ...). Traces are
exported when the standard OTEL_* variables ask for it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagsFromEnv(cmd.Flags(), edgeEnv); err != nil {
				return err
			}
			if err := flagsFromEnv(cmd.Flags(), signInEnv); err != nil {
				return err
			}
			if err := flagsFromEnv(cmd.Flags(), oauthLimitsEnv); err != nil {
				return err
			}
			if err := flagsFromEnv(cmd.Flags(), oidcEnv); err != nil {
				return err
			}
			log, flush := telemetry.Logger(os.Stderr) // a line per request: written in batches
			defer flush()
			return runEdge(cmd.Context(), o, cmd.OutOrStdout(), log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.NATS, "nats", o.NATS, "NATS server URL(s), comma-separated")
	addNATSAuthFlags(f, &o.NATSAuth)
	f.StringVar(&o.Edge.Listen, "listen", o.Edge.Listen, "HTTP listen address")
	f.StringVar(&o.Edge.BaseURL, "base-url", "", "the edge's public URL, from which links and API URLs are made (default http://<listen>)")
	f.StringVar(&o.LinkSecretFile, "link-secret-file", "", "file holding the deployment's link secret (required; the same on every edge)")
	f.StringVar(&o.AdminKeyFile, "admin-key-file", "", "file holding the admin key (empty: no admin API)")
	f.StringVar(&o.CredentialsKeyFile, "credentials-key-file", "", "file (mode 0600) holding the key-encryption keys of the connections' credentials, the current one first, the same on every edge (empty: no credentials)")
	f.DurationVar(&o.OAuth.FlowLifetime, "oauth-flow-lifetime", o.OAuth.FlowLifetime, "how long an account holder may take to authorize a tool at its OAuth provider, from the connect URL to the callback")
	f.DurationVar(&o.OAuth.RefreshBefore, "oauth-refresh-before", o.OAuth.RefreshBefore, "how long before an OAuth connection's access token expires the gateway refreshes it")
	f.DurationVar(&o.OAuth.RefreshLease, "oauth-refresh-lease", o.OAuth.RefreshLease, "how long the edge refreshing an OAuth grant holds it before another edge may take over (bounds one refresh)")
	f.IntVar(&o.Replicas, "replicas", o.Replicas, replicasUsage)
	f.DurationVar(&o.Wait, "wait", o.Wait, waitUsage)
	f.BoolVar(&o.UpdateRegistry, "update-registry", o.UpdateRegistry, "change the registry's existing buckets, the MCP event log and the calls' bucket to --replicas (and --mcp-event-retention, --calls-ttl), instead of refusing to start when they differ")
	f.DurationVar(&o.RevokeAttempt, "revoke-attempt", registry.DefaultRevokeAttempt, "how long one attempt of a revocation's write (a key revoked, a link rotated, a connection or an account removed) waits for the registry before the next, while a NATS node's loss has its buckets elect new leaders: the revocation is answered within this of the election")
	f.DurationVar(&o.ConfirmWait, "revocation-check-wait", registry.DefaultConfirmWait, "how long an edge whose copy of the registry is behind (its follower lost) waits for a bucket's leader to confirm a key or link before it decides from its copy")
	f.DurationVar(&o.WriteWait, "registry-write-wait", registry.DefaultWriteWait, "how long an admin change (accounts, keys, connections, links) keeps trying while the registry cannot take it, as while a NATS node's loss has its buckets elect new leaders, before it fails")
	f.IntVar(&o.Edge.MaxUsers, "max-users-per-account", o.Edge.MaxUsers, "users one account may have (POST /admin/accounts/{id}/users); they live in the account's record")
	f.Int64Var(&o.Edge.MaxBodyBytes, "max-body-bytes", o.Edge.MaxBodyBytes, "largest request body other than a tool call's (never above NATS max_payload less 4 KiB)")
	f.Int64Var(&o.Edge.MaxPayloadBytes, "max-payload-bytes", o.Edge.MaxPayloadBytes, "largest tool call request or reply; past one NATS message it travels through the "+wire.PayloadBucket+" object store (an account's limits.payload_bytes may be lower)")
	f.DurationVar(&o.Gateway.DefaultTimeout, "default-timeout", o.Gateway.DefaultTimeout, "deadline of a call whose method names none")
	f.DurationVar(&o.Gateway.MaxTimeout, "max-timeout", o.Gateway.MaxTimeout, "longest deadline of any call")
	f.DurationVar(&o.Gateway.AsyncMaxTimeout, "async-max-timeout", o.Gateway.AsyncMaxTimeout, "longest deadline of a call made with Prefer: respond-async, which outlives its request (at least --max-timeout, at most "+busauth.ReplyWindow.String()+")")
	f.DurationVar(&o.Calls.TTL, "calls-ttl", o.Calls.TTL, "how long the record of a call made with Prefer: respond-async, and its answer, are kept after its last change (longer than --async-max-timeout); unset, as the shared bucket keeps them ("+calls.DefaultTTL.String()+" when creating it), and a value that differs from the bucket's stops the edge unless --update-registry")
	f.Float64Var(&o.Gateway.Rate, "rate", o.Gateway.Rate, "calls per second per key, for accounts without limits")
	f.IntVar(&o.Gateway.Burst, "burst", o.Gateway.Burst, "calls a key may make at once above the rate")
	f.DurationVar(&o.Gateway.CallLostAfter, "call-lost-after", o.Gateway.CallLostAfter, "how long a call may go unheard of by its tool's workers (they name the calls they hold every "+wire.HoldingEvery.String()+") before it is given up as lost with a 503 (at least "+bus.MinCallLost.String()+"); longer for workers on hosts so loaded that their word can come late")
	f.BoolVar(&o.EdgeRates, "edge-rates", o.EdgeRates, "keep each key's rate in this edge alone (N edges then allow N times the rate) instead of in the registry's shared buckets")
	f.DurationVar(&o.Edge.DrainDelay, "drain-delay", o.Edge.DrainDelay, "at shutdown (SIGTERM), how long the edge goes on serving with /readyz unready, so that balancers send new requests elsewhere, before it stops taking connections")
	f.IntVar(&o.AskConcurrency, "ask-concurrency", o.AskConcurrency, "workers' asks (their records, presence, state and session messages) this edge works on at once; the rest wait, in order, until one ends (each ask takes at most "+wire.AskTimeout.String()+")")
	f.DurationVar(&o.Edge.ShutdownTimeout, "shutdown-timeout", o.Edge.ShutdownTimeout, "at shutdown, after the drain delay, how long in-flight requests and calls get to finish")
	f.DurationVar(&o.Edge.ReadHeaderTimeout, "read-header-timeout", o.Edge.ReadHeaderTimeout, "how long a client may take to send a request's headers")
	f.DurationVar(&o.Edge.ReadBodyTimeout, "read-body-timeout", o.Edge.ReadBodyTimeout, "how long a client may take to send a request's body once its headers are in (408 past it)")
	f.BoolVar(&o.Dashboard, "dashboard", o.Dashboard, "serve the deployment dashboard under "+edge.DashboardPath)
	f.DurationVar(&o.MCP.KeepAlive, "mcp-keep-alive", o.MCP.KeepAlive, "how often an idle MCP stream gets a keep-alive comment")
	f.IntVar(&o.MCP.MaxSessionsPerAccount, "mcp-max-sessions", o.MCP.MaxSessionsPerAccount, "MCP sessions one account may hold at once (an account's limits override it)")
	f.DurationVar(&o.MCP.SessionIdle, "mcp-session-idle", o.MCP.SessionIdle, "how long an MCP session lives after its last request while its client holds no stream (one that holds a stream lives while it does)")
	f.IntVar(&o.MCP.MaxListenTasks, "mcp-listen-tasks", o.MCP.MaxListenTasks, "task ids one MCP subscriptions/listen stream (2026-07-28, tasks extension) may follow")
	f.DurationVar(&o.MCP.StreamAfter, "mcp-stream-after", o.MCP.StreamAfter, "how long an MCP call may run before its answer, to a client that takes JSON or a stream, becomes a resumable stream")
	f.DurationVar(&o.MCP.EventRetention, "mcp-event-retention", o.MCP.EventRetention, "how long MCP stream events are kept for clients that reconnect; unset, as the shared event log keeps them (10m when creating it), and a value that differs from the log's stops the edge unless --update-registry")
	f.StringSliceVar(&o.MCP.AllowedOrigins, "mcp-allowed-origins", nil, "browser origins allowed to use MCP links besides the edge's own (\"*\" for any)")
	f.StringSliceVar(&o.MCP.AllowedHosts, "mcp-allowed-hosts", nil, "Host values accepted on a loopback listener besides localhost (DNS rebinding protection)")
	addAuditFlags(f, &o)
	addApprovalFlags(f, &o.Approvals)
	addSignInFlags(f, &o.SignIn)
	addOAuthLimitFlags(f, &o.SignIn.Limits)
	return cmd
}

// runEdge serves one edge until ctx ends.
func runEdge(ctx context.Context, o edgeOptions, out io.Writer, log *slog.Logger) error {
	if err := o.Validate(); err != nil {
		return err
	}
	linkSecret, err := readSecretFileWithin(ctx, o.LinkSecretFile, o.Wait, log)
	if err != nil {
		return fmt.Errorf("edge: link-secret-file: %w", err)
	}
	signer, err := registry.NewLinkSigner([]byte(linkSecret))
	if err != nil {
		return fmt.Errorf("edge: link-secret-file: %w", err)
	}
	if o.AdminKeyFile != "" {
		adminKey, err := readSecretFileWithin(ctx, o.AdminKeyFile, o.Wait, log)
		if err != nil {
			return fmt.Errorf("edge: admin-key-file: %w", err)
		}
		o.Edge.AdminKeyHash = registry.Hash(adminKey)
	}
	if o.CredentialsKeyFile != "" {
		if err := waitForFile(ctx, o.CredentialsKeyFile, o.Wait, log); err != nil {
			return fmt.Errorf("edge: credentials-key-file: %w", err)
		}
		if o.credentialKeys, err = credentials.ReadKeyFile(o.CredentialsKeyFile); err != nil {
			return fmt.Errorf("edge: %w", err)
		}
	}

	if err := startPprof(ctx, log); err != nil {
		return fmt.Errorf("edge: %w", err)
	}
	stopTracing, err := telemetry.Start(ctx, "toolgate-edge")
	if err != nil {
		return err
	}
	defer func() {
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = stopTracing(flush)
	}()

	nc, ctx, stop, err := connectNATS(ctx, o.NATS, "toolgate-edge", o.NATSAuth, o.Wait, log)
	if err != nil {
		return fmt.Errorf("edge: %w", err)
	}
	defer nc.Close()
	defer stop()
	setup, cancel := context.WithTimeout(ctx, max(registryWait, o.Wait))
	defer cancel()
	store, err := registry.Open(setup, nc, registry.Options{Replicas: o.Replicas, Update: o.UpdateRegistry, WriteWait: o.WriteWait,
		Subjects: o.Gateway.Subjects, RevokeAttempt: o.RevokeAttempt, ConfirmWait: o.ConfirmWait})
	if err != nil {
		return lost(ctx, err)
	}
	// What workers, which have no JetStream reach, ask the edges to store for them.
	asked, err := asks.Serve(nc, o.Gateway.Subjects, o.AskConcurrency, log)
	if err != nil {
		return err
	}
	defer asked.Stop()
	return lost(ctx, serveEdge(ctx, o, nc, store, signer, log, func(listen, base string) {
		fmt.Fprintf(out, "toolgate edge: listening on %s, links under %s\n", listen, base)
	}))
}

// openGatewayParts opens what the gateway's options hold beside the registry's view:
// the shared rate and quota buckets, the audit trail, the credentials' vault, the
// payloads' object store and the approvals. closeParts closes what was opened, the
// last first; it is never nil.
func openGatewayParts(ctx context.Context, o *edgeOptions, nc *nats.Conn, store *registry.Store,
	log *slog.Logger) (opts []gateway.Option, closeParts func(), err error) {
	var closers []func()
	closeParts = func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}
	opts = []gateway.Option{gateway.WithLogger(log), gateway.WithQuotas(store)}
	if !o.EdgeRates {
		opts = append(opts, gateway.WithSharedRates(store, log))
	}
	var trail *audit.Trail // nil: no audit trail
	if !o.NoAudit {
		if trail, err = openTrail(ctx, *o, nc, store, log); err != nil {
			return nil, closeParts, err
		}
		closers = append(closers, func() { closeTrail(trail, o.Edge.ShutdownTimeout, log) })
		opts = append(opts, gateway.WithAudit(trail))
	}
	if o.credentialKeys != nil {
		vopts, err := openVault(ctx, o, store, log)
		if err != nil {
			return nil, closeParts, err
		}
		opts = append(opts, vopts...)
	}
	// The claim check: requests and replies past one NATS message.
	objects, err := payloads.Open(ctx, nc, o.Replicas)
	if err != nil {
		return nil, closeParts, err
	}
	opts = append(opts, gateway.WithPayloads(objects, o.Edge.MaxPayloadBytes))
	o.Approvals.Subjects = o.Gateway.Subjects
	if o.Edge.Approvals, err = approvals.Open(ctx, nc, store, o.Approvals, trail, log); err != nil {
		return nil, closeParts, err
	}
	closers = append(closers, func() { closeApprovals(o.Edge.Approvals, o.Edge.ShutdownTimeout) })
	return append(opts, gateway.WithApprovals(o.Edge.Approvals)), closeParts, nil
}

// serveEdge runs one edge on an open registry until ctx ends: what `toolgate edge`
// and `toolgate dev` share. ready is told where the edge listens and its base URL
// once it accepts connections.
func serveEdge(ctx context.Context, o edgeOptions, nc *nats.Conn, store *registry.Store, signer *registry.LinkSigner,
	log *slog.Logger, ready func(listen, base string)) error {
	view, err := registry.NewView(ctx, store, log)
	if err != nil {
		return err
	}
	gwOpts, closeParts, err := openGatewayParts(ctx, &o, nc, store, log)
	defer closeParts()
	if err != nil {
		return err
	}
	gw, err := gateway.New(nc, view, o.Gateway, gwOpts...)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.Edge.Listen)
	if err != nil {
		return fmt.Errorf("edge: listen: %w", err)
	}
	if o.Edge.BaseURL == "" {
		o.Edge.BaseURL = localURL(ln.Addr())
	}
	if o.Edge.Credentials != nil {
		// The callback is on the base URL, known once the edge listens.
		o.OAuth.RedirectURL = strings.TrimRight(o.Edge.BaseURL, "/") + edge.OAuthCallbackPath
		if err := o.Edge.Credentials.EnableOAuth(ctx, o.OAuth, o.UpdateRegistry); err != nil {
			ln.Close()
			return err
		}
	}
	if o.Edge.SignIn, o.Edge.AuthServer, err = openSignIn(ctx, o.SignIn, store, view, o.credentialKeys, o.Edge.BaseURL, o.Dashboard, log); err != nil {
		ln.Close()
		return err
	}
	if o.Edge.IdP, err = openIdP(ctx, o.SignIn.IdP); err != nil {
		ln.Close()
		return err
	}
	if o.Dashboard {
		dcfg := dashboard.DefaultConfig()
		dcfg.Prefix, dcfg.BaseURL, dcfg.Approvals = edge.DashboardPath, o.Edge.BaseURL, o.Edge.Approvals
		dcfg.SignIn = o.Edge.AuthServer
		if o.Edge.IdP != nil {
			dcfg.IdP = o.Edge.IdP.URL
		}
		if o.Edge.Credentials != nil {
			dcfg.Connector = o.Edge.Credentials
		}
		d, err := dashboard.New(dcfg, gw, store, signer, log)
		if err != nil {
			ln.Close()
			return err
		}
		o.Edge.Dashboard = d
	}
	if u, err := url.Parse(o.Edge.BaseURL); err == nil && u.Host != "" {
		o.MCP.AllowedHosts = append(o.MCP.AllowedHosts, u.Host) // the edge's public name is never a rebinding
	}
	o.Calls.Update = o.UpdateRegistry
	if o.Edge.Calls, err = calls.Open(ctx, nc, store, o.Calls, log); err != nil {
		ln.Close()
		return err
	}
	o.MCP.Tasks = o.Edge.Calls // MCP tasks are calls that outlive their request
	o.MCP.Approvals = o.Edge.Approvals
	mcp, err := sse.New(ctx, gw, store, o.MCP, log)
	if err != nil {
		ln.Close()
		return err
	}
	o.Edge.MCP = mcp
	e, err := edge.New(gw, store, signer, o.Edge, log)
	if err != nil {
		ln.Close()
		return err
	}
	ready(localURL(ln.Addr()), o.Edge.BaseURL)
	return e.Serve(ctx, ln)
}

// openVault opens and follows the credentials bucket for o's edge, and returns the
// gateway's options that send calls with their accounts' values.
func openVault(ctx context.Context, o *edgeOptions, store *registry.Store, log *slog.Logger) ([]gateway.Option, error) {
	vault, err := credentials.Open(ctx, store, o.credentialKeys, o.UpdateRegistry)
	if err != nil {
		return nil, err
	}
	vault.Follow(ctx, log)
	o.Edge.Credentials = vault
	opts := []gateway.Option{gateway.WithCredentials(vault)}
	if o.Dashboard {
		// The base URL is known once the edge listens, before any call.
		opts = append(opts, gateway.WithConnectURL(func(tool string) string {
			return edge.ConnectURL(strings.TrimRight(o.Edge.BaseURL, "/"), tool)
		}))
	}
	return opts, nil
}

// addAuditFlags are the audit trail's flags of `toolgate edge`.
func addAuditFlags(f *pflag.FlagSet, o *edgeOptions) {
	f.BoolVar(&o.NoAudit, "no-audit", o.NoAudit, "keep no audit trail (a record of every call answered and every admin change)")
	f.DurationVar(&o.Audit.MaxAge, "audit-max-age", o.Audit.MaxAge, "how long the audit trail keeps a record; unset, as the trail keeps them ("+audit.DefaultMaxAge.String()+" when creating it), and a value that differs from the trail's stops the edge unless --update-registry")
	f.Int64Var(&o.Audit.MaxBytes, "audit-max-bytes", o.Audit.MaxBytes, "how many bytes of records the audit trail keeps, dropping the oldest beyond; unset, as the trail keeps them (1 GiB when creating it), and a value that differs stops the edge unless --update-registry")
}

// openTrail opens the audit trail beside the registry: its replicas, its subject
// prefix, and its --update-registry.
func openTrail(ctx context.Context, o edgeOptions, nc *nats.Conn, store *registry.Store, log *slog.Logger) (*audit.Trail, error) {
	ao := o.Audit
	ao.Subjects, ao.Replicas, ao.Update = o.Gateway.Subjects, store.Options().Replicas, o.UpdateRegistry
	setup, cancel := context.WithTimeout(ctx, registryWait)
	defer cancel()
	trail, err := audit.Open(setup, nc, ao, log)
	if err != nil {
		return nil, fmt.Errorf("edge: %w (edge credentials issued before the audit trail do not reach it: "+
			"remove edge.creds and run toolgate creds init to issue them again, or run with --no-audit)", err)
	}
	return trail, nil
}

// closeTrail writes what the trail holds still, for as long as the edge gives calls
// in flight at shutdown.
func closeTrail(t *audit.Trail, wait time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), max(wait, time.Second))
	defer cancel()
	if err := t.Close(ctx); err != nil {
		log.Warn("edge: audit trail", "err", err)
	}
}

// flagsFromEnv sets each flag the command line left alone from its variable, if set.
func flagsFromEnv(f *pflag.FlagSet, vars map[string]string) error {
	for name, env := range vars {
		v, ok := os.LookupEnv(env)
		if !ok || f.Changed(name) {
			continue
		}
		if err := f.Set(name, v); err != nil {
			return fmt.Errorf("%s: %w", env, err)
		}
	}
	return nil
}
