package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/asks"
	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
	"github.com/toolgate/toolgate/workers/demo"
)

// devConfig is the embedded default stack's configuration.
type devConfig struct {
	Data       string // state: NATS store, secrets
	NATSListen string // so separately started workers can join
	Listen     string // the edge
	BaseURL    string // how clients reach the edge; derived from Listen when empty

	// NATS, when set, is a NATS system to run on instead of the embedded server, joined
	// with NATSAuth (the admin role's credentials: the stack makes its account and keys).
	NATS     string
	NATSAuth bus.ClientAuth
}

func defaultDevConfig() devConfig {
	return devConfig{Data: "./.toolgate", NATSListen: "127.0.0.1:4222", Listen: "127.0.0.1:8080"}
}

// Validate names the first field that is wrong.
func (c devConfig) Validate() error {
	if c.Data == "" {
		return errors.New("dev: data: required")
	}
	if _, _, err := splitHostPort(c.NATSListen); err != nil {
		return fmt.Errorf("dev: nats-listen: %w", err)
	}
	if c.NATS != "" {
		if err := (workerConfig{NATS: c.NATS}).Validate(); err != nil {
			return fmt.Errorf("dev: %w", err)
		}
	}
	if _, _, err := splitHostPort(c.Listen); err != nil {
		return fmt.Errorf("dev: listen: %w", err)
	}
	return nil
}

// The account and tools the dev stack sets up.
const devAccount = "dev"

var devTools = []string{"email", "echo", "clock"}

func newDevCmd() *cobra.Command {
	cfg := defaultDevConfig()
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole stack in one process: embedded NATS, an edge, the demo tools, a dev account",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Validate(); err != nil {
				return err
			}
			log, flush := telemetry.Logger(os.Stderr) // a line per request: written in batches
			defer flush()
			return runDev(cmd.Context(), cfg, cmd.OutOrStdout(), log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Data, "data", envOr("TOOLGATE_DATA", cfg.Data), "state directory (NATS store, keys)")
	f.StringVar(&cfg.NATSListen, "nats-listen", envOr("TOOLGATE_NATS_LISTEN", cfg.NATSListen), "embedded NATS client address")
	f.StringVar(&cfg.NATS, "nats", "", "run on this NATS system (URLs, comma-separated) instead of the embedded server; with --nats-creds of the admin role where it requires credentials")
	addNATSAuthFlags(f, &cfg.NATSAuth)
	f.StringVar(&cfg.Listen, "listen", envOr("TOOLGATE_LISTEN", cfg.Listen), "edge HTTP address")
	f.StringVar(&cfg.BaseURL, "base-url", envOr("TOOLGATE_BASE_URL", ""), "public URL of the edge (default http://<listen>)")
	return cmd
}

// devState is what the dev stack keeps in its data directory.
type devState struct {
	key        string // the dev account's API key
	keyCreated bool
	keyRecord  registry.Key // as the registry holds it: revoked, perhaps
	adminKey   string
	linkSecret string
}

// devKeyID is the id of the dev account's first key.
const devKeyID = "key_dev"

func runDev(ctx context.Context, cfg devConfig, out io.Writer, log *slog.Logger) error {
	if err := startPprof(ctx, log); err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	if err := os.MkdirAll(cfg.Data, 0o700); err != nil {
		return fmt.Errorf("dev: data: %w", err)
	}
	// The dev stack owns its embedded server: buckets an older version made with other
	// settings are brought to this version's rather than refused. On a NATS system of
	// its own, it takes them as they are.
	opts := registry.DefaultOptions()
	opts.Update = true
	natsURL := cfg.NATS
	if natsURL == "" {
		host, port, _ := splitHostPort(cfg.NATSListen)
		if port == 0 {
			port = -1 // nats-server reads 0 as its default port; the user asked for any free one
		}
		ns, err := bus.StartServer(bus.ServerConfig{
			Name: "toolgate-dev", Host: host, Port: port, JetStream: true, StoreDir: filepath.Join(cfg.Data, "nats"),
		})
		if err != nil {
			return fmt.Errorf("dev: %w", err)
		}
		defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
		natsURL = ns.ClientURL()
	} else {
		opts = registry.Options{}
	}
	nc, ctx, stop, err := connectNATS(ctx, natsURL, "toolgate-dev", cfg.NATSAuth, 0, log)
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	defer nc.Close()
	defer stop()

	setupCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	store, err := registry.Open(setupCtx, nc, opts)
	if err != nil {
		return lost(ctx, err)
	}
	state, err := setupDev(setupCtx, cfg.Data, store)
	if err != nil {
		return lost(ctx, err)
	}
	return lost(ctx, serveDev(ctx, cfg, state, natsURL, nc, store, out, log))
}

// setupDev makes (or finds again) the dev account, its key, its connections, the demo
// tools' state buckets, and the stack's secrets, kept in the directory data. The plain key lives only in
// <data>/dev-key; the registry holds its hash, re-imported on each start so a wiped
// store and a kept key still agree. `toolgate bootstrap` sets up a compose stack with
// it too.
func setupDev(ctx context.Context, data string, store *registry.Store) (*devState, error) {
	st := &devState{}
	var err error
	if st.linkSecret, _, err = loadOrCreateSecret(filepath.Join(data, "link-secret"), registry.NewLinkSecret); err != nil {
		return nil, fmt.Errorf("dev: link secret: %w", err)
	}
	if st.adminKey, _, err = loadOrCreateSecret(filepath.Join(data, "admin-key"), registry.NewKey); err != nil {
		return nil, fmt.Errorf("dev: admin key: %w", err)
	}
	if _, _, err = loadOrCreateSecret(filepath.Join(data, credentialsKeyFile), credentials.NewKeyLine); err != nil {
		return nil, fmt.Errorf("dev: credentials key: %w", err)
	}
	if _, err := store.CreateAccount(ctx, registry.Account{ID: devAccount, Name: "Local development"}); err != nil && !errors.Is(err, registry.ErrExists) {
		return nil, fmt.Errorf("dev: account: %w", err)
	}
	if st.key, st.keyCreated, err = loadOrCreateSecret(filepath.Join(data, "dev-key"), registry.NewKey); err != nil {
		return nil, fmt.Errorf("dev: key: %w", err)
	}
	if st.keyRecord, err = importDevKey(ctx, store, st.key); err != nil {
		return nil, fmt.Errorf("dev: key: %w", err)
	}
	signer, err := registry.NewLinkSigner([]byte(st.linkSecret))
	if err != nil {
		return nil, fmt.Errorf("dev: %w", err)
	}
	for _, tool := range devTools {
		if _, err := store.Connect(ctx, devAccount, tool, signer); err != nil && !errors.Is(err, registry.ErrExists) {
			return nil, fmt.Errorf("dev: connect %s: %w", tool, err)
		}
	}
	// The demo tools' state (the email tool's outbox), which their workers may not make.
	for _, tool := range demo.StateTools {
		if _, err := registry.CreateToolState(ctx, store.JetStream().Conn(), tool, registry.StateOptions{Replicas: store.Options().Replicas}); err != nil {
			return nil, fmt.Errorf("dev: %w", err)
		}
	}
	return st, nil
}

// importDevKey files the dev key in the registry unless it is there already, and
// returns its record. A key made after the first was revoked gets an id of its own:
// the revoked one keeps devKeyID.
func importDevKey(ctx context.Context, store *registry.Store, key string) (registry.Key, error) {
	keys, err := store.Keys(ctx, devAccount)
	if err != nil {
		return registry.Key{}, err
	}
	if k, ok := keys[registry.Hash(key)]; ok {
		return k, nil
	}
	k := registry.Key{ID: devKeyID, Account: devAccount, Name: "dev"}
	for _, other := range keys {
		if other.ID == devKeyID {
			k.ID = registry.NewID("key_")
		}
	}
	if err := store.ImportKey(ctx, key, k); err != nil {
		return registry.Key{}, err
	}
	return k, nil
}

// serveDev runs the demo tools and an edge (with the dashboard) on the stack's NATS
// until ctx ends, then stops them in order: the edge first, so no new call
// arrives, then the workers, which drain what is in flight.
func serveDev(ctx context.Context, cfg devConfig, st *devState, natsURL string, nc *nats.Conn, store *registry.Store, out io.Writer, log *slog.Logger) error {
	signer, err := registry.NewLinkSigner([]byte(st.linkSecret))
	if err != nil {
		return err
	}
	// The edge's answers to the workers' asks outlive the workers' drain, which asks
	// for their presence to go.
	asked, err := asks.Serve(nc, wire.DefaultSubjects, 0, log)
	if err != nil {
		return err
	}
	defer asked.Stop()
	workerCtx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorkers()
	workersDone := make(chan error, 1)
	go func() { workersDone <- demo.Run(workerCtx, nc, workers.WithLogger(log)) }()

	o := defaultEdgeOptions()
	o.Edge.Listen, o.Edge.BaseURL = cfg.Listen, cfg.BaseURL
	o.Edge.AdminKeyHash = registry.Hash(st.adminKey)
	o.Edge.DrainDelay = 0 // one process, no balancer to tell: it stops at once
	if o.credentialKeys, err = credentials.ReadKeyFile(filepath.Join(cfg.Data, credentialsKeyFile)); err != nil {
		return err
	}
	edgeErr := serveEdge(ctx, o, nc, store, signer, log, func(_, base string) {
		printDevBanner(out, cfg, st, base, natsURL)
	})
	stopWorkers()
	return errors.Join(edgeErr, <-workersDone)
}

// printDevBanner says what a newcomer needs: where everything is, the key, and a
// first call to make; or, when the key in the data directory no longer works, that it
// does not and how to make a new one.
func printDevBanner(w io.Writer, cfg devConfig, st *devState, base, natsURL string) {
	// One write, so that a reader never sees the banner without its key.
	out := &bytes.Buffer{}
	defer func() { _, _ = w.Write(out.Bytes()) }()
	fmt.Fprintf(out, `
toolgate dev is running.

  edge        %[1]s
  dashboard   %[1]s/dashboard/
  NATS        %[2]s  (toolgate worker demo --nats %[2]s joins it)
  data        %[3]s  (admin key in %[3]s/admin-key)
`, base, natsURL, cfg.Data)
	if why := unusable(st.keyRecord, time.Now()); why != "" {
		fmt.Fprintf(out, `
The API key in %[1]s/dev-key (%[2]s...) %[3]s: it no longer works.
To make a new one, stop toolgate dev, delete %[1]s/dev-key and start it again;
or, while it runs, create one for account %[4]q (printed once):

    toolgate keys create %[4]s --name dev --url %[5]s

`, cfg.Data, st.keyRecord.Prefix, why, devAccount, base)
		return
	}
	how := "kept from the last start"
	if st.keyCreated {
		how = "new"
	}
	fmt.Fprintf(out, `
API key for account %[3]q (%[4]s; also in %[2]s/dev-key):

    %[5]s

Try it:

    curl -s %[1]s/get-tools -H 'SERVICE_API_KEY: %[5]s'
    curl -s -X POST %[1]s/tool-call/echo/echo -H 'SERVICE_API_KEY: %[5]s' \
         -H 'Content-Type: application/json' -d '{"hello":"world"}'

`, base, cfg.Data, devAccount, how, st.key)
}

// unusable says why key no longer authenticates at now, or "" while it does.
func unusable(k registry.Key, now time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return "was revoked at " + k.RevokedAt.UTC().Format(time.RFC3339)
	case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
		return "expired at " + k.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return ""
}
