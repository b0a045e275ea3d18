package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/busauth"
)

// natsNode is the settings of the nats command: the server's configuration, and the
// addresses and files it is made from.
type natsNode struct {
	cfg                                                   bus.ServerConfig
	listen, clusterListen, routes, monitorListen, authDir string
	tlsFiles                                              bus.ClientAuth
	wait                                                  time.Duration
}

// newNATSCmd runs one embedded NATS node, for stacks that do not run the official
// nats-server binary. Three of them with --cluster and --routes make a JetStream cluster.
func newNATSCmd() *cobra.Command {
	n := &natsNode{cfg: bus.DefaultServerConfig()}
	cmd := &cobra.Command{
		Use:   "nats",
		Short: "Run one embedded NATS server node (JetStream on; clusterable)",
		Long: `Run one embedded NATS server node (JetStream on; clusterable).

With --auth, the node admits only users of the deployment that ` + "`toolgate creds init`" + `
made (decentralized JWT; revocations take effect at run time). With --nats-tls-cert
and --nats-tls-key it serves clients and routes over TLS only; routes verify each
other against --nats-tls-ca, and with --tls-verify so are clients.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagsFromEnv(cmd.Flags(), map[string]string{"wait": "TOOLGATE_WAIT",
				"cluster-ping": "TOOLGATE_NATS_CLUSTER_PING", "client-ping": "TOOLGATE_NATS_CLIENT_PING"}); err != nil {
				return err
			}
			return n.run(cmd)
		},
	}
	n.addFlags(cmd.Flags())
	return cmd
}

// addFlags defines the command's flags, each with its default from the environment.
func (n *natsNode) addFlags(f *pflag.FlagSet) {
	f.StringVar(&n.cfg.Name, "name", envOr("TOOLGATE_NATS_NAME", n.cfg.Name), "server name (unique within a cluster)")
	f.StringVar(&n.listen, "listen", envOr("TOOLGATE_NATS_LISTEN", "127.0.0.1:4222"), "client listen address")
	f.StringVar(&n.cfg.StoreDir, "store-dir", envOr("TOOLGATE_NATS_STORE", "./.toolgate/nats"), "JetStream store directory (with --auth, the node's account JWTs too)")
	f.BoolVar(&n.cfg.JetStream, "jetstream", true, "enable JetStream")
	f.StringVar(&n.cfg.Cluster.Name, "cluster", envOr("TOOLGATE_NATS_CLUSTER", ""), "cluster name (empty: a single node)")
	f.StringVar(&n.clusterListen, "cluster-listen", envOr("TOOLGATE_NATS_CLUSTER_LISTEN", "127.0.0.1:6222"), "cluster route listen address")
	f.StringVar(&n.routes, "routes", envOr("TOOLGATE_NATS_ROUTES", ""), "comma-separated nats-route://host:port of the other nodes")
	f.DurationVar(&n.cfg.Cluster.PingInterval, "cluster-ping", bus.DefaultRoutePing, "how often a route to another node is asked for a sign of life; one that misses "+fmt.Sprint(bus.MaxPingsOut)+" in a row is given up, and messages stop going to that node's clients (env TOOLGATE_NATS_CLUSTER_PING)")
	f.DurationVar(&n.cfg.PingInterval, "client-ping", bus.DefaultClientPing, "how often a silent client is asked for a sign of life; one that misses "+fmt.Sprint(bus.MaxPingsOut)+" in a row is taken for gone, its subscriptions with it (env TOOLGATE_NATS_CLIENT_PING)")
	f.StringVar(&n.monitorListen, "monitor-listen", envOr("TOOLGATE_NATS_MONITOR_LISTEN", ""), "HTTP monitoring address: /healthz for health checks, /varz, /jsz (empty: none)")
	f.StringVar(&n.authDir, "auth", envOr("TOOLGATE_NATS_AUTH", ""), "the deployment's server directory (<creds dir>/server, from toolgate creds init): admit only its users (empty: anyone)")
	addNATSTLSFlags(f, &n.tlsFiles)
	f.DurationVar(&n.wait, "wait", n.wait, "how long to wait at start for the files of --auth and the TLS files, which a stack's init step may still be making (env TOOLGATE_WAIT)")
	f.BoolVar(&n.cfg.TLS.VerifyClients, "tls-verify", envOr("TOOLGATE_NATS_TLS_VERIFY", "") == "true", "require clients to present a certificate signed by --nats-tls-ca (env TOOLGATE_NATS_TLS_VERIFY)")
}

// run serves until the command's context ends.
func (n *natsNode) run(cmd *cobra.Command) error {
	if err := n.addresses(); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
	if err := n.security(cmd.Context(), log); err != nil {
		return err
	}
	s, err := bus.StartServer(n.cfg)
	if err != nil {
		return err
	}
	cfg := n.cfg
	fmt.Fprintf(cmd.OutOrStdout(), "nats: %s listening on %s (JetStream: %v, cluster: %q, auth: %v, TLS: %v)\n",
		cfg.Name, s.ClientURL(), cfg.JetStream, cfg.Cluster.Name, cfg.Auth != nil, cfg.TLS.Enabled())
	<-cmd.Context().Done()
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

// addresses sets the server's addresses from the flags'.
func (n *natsNode) addresses() error {
	cfg := &n.cfg
	var err error
	if cfg.Host, cfg.Port, err = splitHostPort(n.listen); err != nil {
		return fmt.Errorf("nats: listen: %w", err)
	}
	if cfg.Port == 0 {
		cfg.Port = -1 // nats-server reads 0 as its default port; the user asked for any free one
	}
	if n.monitorListen != "" {
		if cfg.MonitorHost, cfg.MonitorPort, err = splitHostPort(n.monitorListen); err != nil {
			return fmt.Errorf("nats: monitor-listen: %w", err)
		}
	}
	if cfg.Cluster.Name != "" {
		if cfg.Cluster.Host, cfg.Cluster.Port, err = splitHostPort(n.clusterListen); err != nil {
			return fmt.Errorf("nats: cluster-listen: %w", err)
		}
		if n.routes != "" {
			cfg.Cluster.Routes = strings.Split(n.routes, ",")
		}
	}
	return nil
}

// security sets the server's users (--auth) and TLS files. In a stack the step that
// makes the bus's security may still be at work: it waits for its last file, and for
// the certificate and key.
func (n *natsNode) security(ctx context.Context, log *slog.Logger) error {
	waitFor := []string{n.tlsFiles.CA, n.tlsFiles.Cert, n.tlsFiles.Key}
	if n.authDir != "" {
		waitFor = append(waitFor, filepath.Join(n.authDir, busauth.ServerConfFile))
	}
	for _, f := range waitFor {
		if f == "" {
			continue
		}
		if err := waitForFile(ctx, f, n.wait, log); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("nats: %w", err)
		}
	}
	if n.authDir != "" {
		auth, err := busauth.ServerAuth(n.authDir)
		if err != nil {
			return fmt.Errorf("nats: auth: %w", err)
		}
		n.cfg.Auth = auth
	}
	n.cfg.TLS.CA, n.cfg.TLS.Cert, n.cfg.TLS.Key = n.tlsFiles.CA, n.tlsFiles.Cert, n.tlsFiles.Key
	return nil
}
