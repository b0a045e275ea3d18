package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/busauth"
)

// newNATSCmd runs one embedded NATS node, for stacks that do not run the official
// nats-server binary. Three of them with --cluster and --routes make a JetStream cluster.
func newNATSCmd() *cobra.Command {
	cfg := bus.DefaultServerConfig()
	var listen, clusterListen, routes, monitorListen, authDir string
	var tlsFiles bus.ClientAuth
	var wait time.Duration
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
			var err error
			if cfg.Host, cfg.Port, err = splitHostPort(listen); err != nil {
				return fmt.Errorf("nats: listen: %w", err)
			}
			if cfg.Port == 0 {
				cfg.Port = -1 // nats-server reads 0 as its default port; the user asked for any free one
			}
			if monitorListen != "" {
				if cfg.MonitorHost, cfg.MonitorPort, err = splitHostPort(monitorListen); err != nil {
					return fmt.Errorf("nats: monitor-listen: %w", err)
				}
			}
			if cfg.Cluster.Name != "" {
				if cfg.Cluster.Host, cfg.Cluster.Port, err = splitHostPort(clusterListen); err != nil {
					return fmt.Errorf("nats: cluster-listen: %w", err)
				}
				if routes != "" {
					cfg.Cluster.Routes = strings.Split(routes, ",")
				}
			}
			// In a stack the step that makes the bus's security may still be at work:
			// wait for its last file, and for the certificate and key.
			log := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
			waitFor := []string{tlsFiles.CA, tlsFiles.Cert, tlsFiles.Key}
			if authDir != "" {
				waitFor = append(waitFor, filepath.Join(authDir, busauth.ServerConfFile))
			}
			for _, f := range waitFor {
				if f == "" {
					continue
				}
				if err := waitForFile(cmd.Context(), f, wait, log); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("nats: %w", err)
				}
			}
			if authDir != "" {
				if cfg.Auth, err = busauth.ServerAuth(authDir); err != nil {
					return fmt.Errorf("nats: auth: %w", err)
				}
			}
			cfg.TLS.CA, cfg.TLS.Cert, cfg.TLS.Key = tlsFiles.CA, tlsFiles.Cert, tlsFiles.Key
			s, err := bus.StartServer(cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "nats: %s listening on %s (JetStream: %v, cluster: %q, auth: %v, TLS: %v)\n",
				cfg.Name, s.ClientURL(), cfg.JetStream, cfg.Cluster.Name, cfg.Auth != nil, cfg.TLS.Enabled())
			<-cmd.Context().Done()
			s.Shutdown()
			s.WaitForShutdown()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Name, "name", envOr("TOOLGATE_NATS_NAME", cfg.Name), "server name (unique within a cluster)")
	f.StringVar(&listen, "listen", envOr("TOOLGATE_NATS_LISTEN", "127.0.0.1:4222"), "client listen address")
	f.StringVar(&cfg.StoreDir, "store-dir", envOr("TOOLGATE_NATS_STORE", "./.toolgate/nats"), "JetStream store directory (with --auth, the node's account JWTs too)")
	f.BoolVar(&cfg.JetStream, "jetstream", true, "enable JetStream")
	f.StringVar(&cfg.Cluster.Name, "cluster", envOr("TOOLGATE_NATS_CLUSTER", ""), "cluster name (empty: a single node)")
	f.StringVar(&clusterListen, "cluster-listen", envOr("TOOLGATE_NATS_CLUSTER_LISTEN", "127.0.0.1:6222"), "cluster route listen address")
	f.StringVar(&routes, "routes", envOr("TOOLGATE_NATS_ROUTES", ""), "comma-separated nats-route://host:port of the other nodes")
	f.DurationVar(&cfg.Cluster.PingInterval, "cluster-ping", bus.DefaultRoutePing, "how often a route to another node is asked for a sign of life; one that misses "+fmt.Sprint(bus.MaxPingsOut)+" in a row is given up, and messages stop going to that node's clients (env TOOLGATE_NATS_CLUSTER_PING)")
	f.DurationVar(&cfg.PingInterval, "client-ping", bus.DefaultClientPing, "how often a silent client is asked for a sign of life; one that misses "+fmt.Sprint(bus.MaxPingsOut)+" in a row is taken for gone, its subscriptions with it (env TOOLGATE_NATS_CLIENT_PING)")
	f.StringVar(&monitorListen, "monitor-listen", envOr("TOOLGATE_NATS_MONITOR_LISTEN", ""), "HTTP monitoring address: /healthz for health checks, /varz, /jsz (empty: none)")
	f.StringVar(&authDir, "auth", envOr("TOOLGATE_NATS_AUTH", ""), "the deployment's server directory (<creds dir>/server, from toolgate creds init): admit only its users (empty: anyone)")
	addNATSTLSFlags(f, &tlsFiles)
	f.DurationVar(&wait, "wait", wait, "how long to wait at start for the files of --auth and the TLS files, which a stack's init step may still be making (env TOOLGATE_WAIT)")
	f.BoolVar(&cfg.TLS.VerifyClients, "tls-verify", envOr("TOOLGATE_NATS_TLS_VERIFY", "") == "true", "require clients to present a certificate signed by --nats-tls-ca (env TOOLGATE_NATS_TLS_VERIFY)")
	return cmd
}
