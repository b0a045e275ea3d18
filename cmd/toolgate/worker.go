package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
	"github.com/toolgate/toolgate/workers/demo"
	"github.com/toolgate/toolgate/workers/mcpbridge"
)

// workerConfig is what a built-in worker needs to join a stack. A worker opens no
// registry: it writes its own records over NATS (see workers).
type workerConfig struct {
	NATS     string // one URL or several, comma-separated
	NATSAuth bus.ClientAuth
	// Replicas of the buckets this process makes (the bootstrap's, a state bucket, the
	// demo worker's on a bus without authentication); 0 for one, or as they are.
	Replicas int
	Wait     time.Duration // see waitUsage
	// HealthListen is where GET /healthz is served (see serveWorkerHealth); empty: nowhere.
	HealthListen string
}

func defaultWorkerConfig() workerConfig {
	cfg := workerConfig{NATS: "nats://127.0.0.1:4222"}
	if v, ok := os.LookupEnv("TOOLGATE_NATS"); ok {
		cfg.NATS = v
	}
	if v, ok := os.LookupEnv("TOOLGATE_REPLICAS"); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			n = -1 // Validate names the bad value
		}
		cfg.Replicas = n
	}
	if v, ok := os.LookupEnv("TOOLGATE_WAIT"); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			d = -1 // Validate names the bad value
		}
		cfg.Wait = d
	}
	cfg.HealthListen = os.Getenv(healthEnv)
	return cfg
}

// Validate names the first field that is wrong.
func (c workerConfig) Validate() error {
	if c.NATS == "" {
		return errors.New("worker: nats: required")
	}
	for _, u := range strings.Split(c.NATS, ",") {
		p, err := url.Parse(strings.TrimSpace(u))
		if err != nil || p.Host == "" || !slices.Contains([]string{"nats", "tls", "ws", "wss"}, p.Scheme) {
			return fmt.Errorf("worker: nats: %q: must be a nats://host:port URL", u)
		}
	}
	if c.Replicas < 0 || c.Replicas > 5 {
		return errors.New("worker: replicas: must be from 1 to 5, or 0 for the registry's own")
	}
	if c.Wait < 0 {
		return errors.New("worker: wait: must be a duration, not negative (TOOLGATE_WAIT)")
	}
	return nil
}

func newWorkerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a built-in worker",
	}
	cmd.AddCommand(newWorkerDemoCmd(), newWorkerMCPCmd())
	return cmd
}

func newWorkerDemoCmd() *cobra.Command {
	cfg := defaultWorkerConfig()
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Serve the demo tools (email, echo, clock) until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Validate(); err != nil {
				return err
			}
			return runDemoWorker(cmd.Context(), cfg, slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil)))
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.NATS, "nats", cfg.NATS, "NATS URL, or several comma-separated (env TOOLGATE_NATS)")
	addNATSAuthFlags(f, &cfg.NATSAuth)
	f.IntVar(&cfg.Replicas, "replicas", cfg.Replicas, "replicas of the email tool's state bucket (its outbox) when this process makes it, on a bus without authentication: 1 on a single node, 3 in a cluster (env TOOLGATE_REPLICAS)")
	f.DurationVar(&cfg.Wait, "wait", cfg.Wait, waitUsage+" (env TOOLGATE_WAIT)")
	f.StringVar(&cfg.HealthListen, "health-listen", cfg.HealthListen, "address to serve GET /healthz on, for container health checks (env "+healthEnv+"; empty: none)")
	return cmd
}

// runDemoWorker serves the demo tools until ctx ends (SIGINT or SIGTERM), then drains.
// The email tool keeps its outbox in its state bucket. With credentials (the demo
// tools', toolgate creds issue email echo clock) the worker may not make it: an admin
// does (toolgate bootstrap, toolgate state create email), and the worker waits for
// it up to cfg.Wait. On a bus without authentication it makes it itself.
func runDemoWorker(ctx context.Context, cfg workerConfig, log *slog.Logger) error {
	// Its inboxes are the email tool's, the one of the three with state: the
	// JetStream client's answers come there.
	ctx, nc, stop, err := joinBus(ctx, cfg, "toolgate-worker-demo", log, workers.Inbox("email"))
	if err != nil {
		return err
	}
	defer nc.Close()
	defer stop()
	for _, tool := range demo.StateTools {
		if cfg.NATSAuth.Creds == "" {
			setup, cancel := context.WithTimeout(ctx, max(registryWait, cfg.Wait))
			_, err = registry.CreateToolState(setup, nc, tool, registry.StateOptions{Replicas: cfg.Replicas})
			cancel()
		} else {
			err = waitForState(ctx, nc, tool, cfg.Wait, log)
		}
		if err != nil {
			return lost(ctx, fmt.Errorf("worker: %w", err))
		}
	}
	return lost(ctx, demo.Run(ctx, nc, workers.WithLogger(log)))
}

// joinBus is how a worker role starts: Go profiles if asked, and a NATS connection
// with the worker's credentials. The context returned ends when the connection is
// lost for good (its credentials revoked); call stop before closing nc.
func joinBus(ctx context.Context, cfg workerConfig, name string, log *slog.Logger, extra ...nats.Option) (context.Context, *nats.Conn, context.CancelFunc, error) {
	if err := startPprof(ctx, log); err != nil {
		return nil, nil, nil, fmt.Errorf("worker: %w", err)
	}
	nc, ctx, stop, err := connectNATS(ctx, cfg.NATS, name, cfg.NATSAuth, cfg.Wait, log, extra...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("worker: %w", err)
	}
	if err := serveWorkerHealth(ctx, cfg.HealthListen, nc, log); err != nil {
		stop()
		nc.Close()
		return nil, nil, nil, err
	}
	return ctx, nc, stop, nil
}

func newWorkerMCPCmd() *cobra.Command {
	cfg := defaultWorkerConfig()
	bridge := mcpbridge.DefaultConfig()
	var headers []string
	var oauth bool
	oauthClient := mcpbridge.OAuthClient{GatewayURL: os.Getenv("TOOLGATE_BASE_URL"), HTTP: &http.Client{Timeout: 30 * time.Second}}
	cmd := &cobra.Command{
		Use:   "mcp --tool ID [--title T] [--sessions N] [--upstream-sessions auto|shared|per-session] [--client-sessions N] (-- COMMAND [ARGS...] | --url URL [--header K:V]... [--oauth --base-url URL])",
		Short: "Deploy an existing MCP server as a tool: a stdio command, or a remote URL",
		Example: `  toolgate worker mcp --tool everything -- npx -y @modelcontextprotocol/server-everything
  toolgate worker mcp --tool search --url https://mcp.example.com/mcp --header "Authorization: Bearer $TOKEN"
  toolgate worker mcp --tool linear --url https://mcp.linear.app/mcp --oauth --base-url https://gateway.example.com`,
		RunE: func(cmd *cobra.Command, args []string) error {
			bridge.Command = args
			h, err := parseHeaders("mcp", headers)
			if err != nil {
				return err
			}
			bridge.Header = h
			if oauth {
				bridge.OAuth = &oauthClient
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			if err := bridge.Validate(); err != nil {
				return err
			}
			return runMCPWorker(cmd.Context(), cfg, bridge, slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil)))
		},
	}
	f := cmd.Flags()
	// The server's command and its flags follow the worker's own: COMMAND -y pkg is not
	// read as flags of toolgate's.
	f.SetInterspersed(false)
	f.StringVar(&cfg.NATS, "nats", cfg.NATS, "NATS URL, or several comma-separated (env TOOLGATE_NATS)")
	addNATSAuthFlags(f, &cfg.NATSAuth)
	f.DurationVar(&cfg.Wait, "wait", cfg.Wait, waitUsage+" (env TOOLGATE_WAIT)")
	f.StringVar(&cfg.HealthListen, "health-listen", cfg.HealthListen, "address to serve GET /healthz on, for container health checks (env "+healthEnv+"; empty: none)")
	f.StringVar(&bridge.Tool, "tool", "", "the tool's id")
	f.StringVar(&bridge.Title, "title", "", "the tool's title (default: the server's own)")
	f.IntVar(&bridge.Sessions, "sessions", bridge.Sessions, "the pool of shared upstream sessions (for a command, processes): calls without an MCP session (HTTP API), and those of client sessions that share, are spread over them")
	f.StringVar(&bridge.UpstreamSessions, "upstream-sessions", bridge.UpstreamSessions, "how MCP client sessions map to upstream sessions: shared (all spread over the --sessions pool), per-session (one each, within --client-sessions), or auto: per-session when the server declares logging, resources.subscribe or tasks, or the client declares sampling, elicitation or roots; else shared")
	f.IntVar(&bridge.ClientSessions, "client-sessions", bridge.ClientSessions, "most upstream sessions (for a command, processes) held at once for MCP client sessions, one each; more are refused until one ends")
	f.DurationVar(&bridge.ClientSessionIdle, "client-session-idle", bridge.ClientSessionIdle, "end the upstream session of an MCP client session that made no request for this long")
	f.StringVar(&bridge.URL, "url", "", "a remote server's Streamable HTTP (or HTTP+SSE) endpoint, instead of a command")
	f.StringArrayVar(&headers, "header", nil, "a header sent to the --url server, as \"Name: value\" (repeatable); {field} in a value is the calling account's value of that connection field")
	f.StringArrayVar(&bridge.Env, "env", nil, "a variable of the command's environment, as NAME=value (repeatable); {field} in a value is the calling account's value of that connection field, and each account's calls then go to a process of its own")
	f.BoolVar(&oauth, "oauth", false, "the --url server requires OAuth: each account connects at the server's authorization server (found from the server), and its calls carry its own access token")
	f.StringVar(&oauthClient.GatewayURL, "base-url", oauthClient.GatewayURL, "with --oauth: the gateway's public URL, its edges' --base-url, where the authorization server redirects and finds the client document (env TOOLGATE_BASE_URL)")
	f.StringVar(&oauthClient.ClientID, "oauth-client-id", "", "with --oauth: the client the deployment registered at the server's authorization server, for one that takes no client document (default: register one)")
	f.StringVar(&oauthClient.MetadataURL, "oauth-client-metadata-url", "", "with --oauth: where the deployment publishes its client ID metadata document, for authorization servers that cannot fetch the gateway's ({base-url}/oauth/client)")
	f.IntVar(&bridge.AccountSessions, "account-sessions", bridge.AccountSessions, "most upstream sessions (for a command, processes) held at once for accounts, when --env or --header names a {field}")
	f.DurationVar(&bridge.AccountIdle, "account-idle", bridge.AccountIdle, "end an account's upstream session that took no call for this long")
	f.IntVar(&bridge.AccountLists, "account-lists", bridge.AccountLists, "with --oauth: most accounts whose tool lists are kept (each account sees and calls only what the server lists to its token); past it the least recently listed is forgotten until that account lists again")
	f.DurationVar(&bridge.CallTimeout, "call-timeout", 0, "the timeout of the server's tools (default: the gateway's)")
	f.StringToStringVar(&bridge.TaskSupport, "task-support", nil, "for a server that knows nothing of tasks, whose tasks the gateway keeps: NAME=required (its clients must call the tool as a task) or NAME=forbidden (never a task), repeatable; the others are optional")
	f.DurationVar(&bridge.StartTimeout, "start-timeout", bridge.StartTimeout, "how long the server may take to start and list its tools")
	return cmd
}

// runMCPWorker serves the MCP server as a tool until ctx ends (SIGINT or SIGTERM),
// then drains and stops the server.
func runMCPWorker(ctx context.Context, cfg workerConfig, bridge mcpbridge.Config, log *slog.Logger) error {
	ctx, nc, stop, err := joinBus(ctx, cfg, "toolgate-worker-mcp-"+bridge.Tool, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	defer stop()
	var opts []workers.Option
	if (len(bridge.ConnectionFields()) > 0 || bridge.OAuth != nil) && cfg.NATSAuth.Creds != "" {
		// The tool's seal key, which every instance of the tool holds: its
		// credentials file carries it.
		kp, err := workers.SealKeyFromCreds(cfg.NATSAuth.Creds, bridge.Tool)
		if err != nil {
			return fmt.Errorf("worker: %w (issue the tool's credentials again: toolgate creds issue %s)", err, bridge.Tool)
		}
		opts = append(opts, workers.WithSealKey(kp))
	}
	return lost(ctx, mcpbridge.New(nc, bridge, log, opts...).Run(ctx))
}
