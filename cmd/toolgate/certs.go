package main

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/busauth"
)

// defaultCertHosts are the names the servers' certificate is valid for unless told
// otherwise: this machine, the compose stack's NATS services, and the Kubernetes
// services of the NATS Helm chart installed as release "toolgate" in namespace
// "toolgate" (its client service and each pod behind its headless service).
var defaultCertHosts = []string{
	"localhost", "127.0.0.1", "::1",
	"nats", "nats-1", "nats-2", "nats-3",
	"toolgate-nats", "toolgate-nats.toolgate", "toolgate-nats.toolgate.svc", "toolgate-nats.toolgate.svc.cluster.local",
	"*.toolgate-nats-headless", "*.toolgate-nats-headless.toolgate.svc", "*.toolgate-nats-headless.toolgate.svc.cluster.local",
}

// makeCertificates makes what is missing of the CA and certificates in dir (see
// busauth.Certificates), run as root giving them to the directory's owner, and
// returns the paths of the files it made.
func makeCertificates(dir string, hosts []string) ([]string, error) {
	made, err := busauth.Certificates(dir, hosts)
	if err != nil {
		return nil, err
	}
	if err := giveTreeToDirOwner(dir); err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	for i, f := range made {
		made[i] = filepath.Join(dir, f)
	}
	return made, nil
}

func newCertsCmd() *cobra.Command {
	dir := envOr("TOOLGATE_CERTS_DIR", filepath.Join(defaultCredsDir, "tls"))
	var hosts []string
	var only bool
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Make a local CA and the NATS servers' and clients' TLS certificates; keeps what exists",
		Long: `Make a local CA and certificates for TLS on the NATS client and route ports into
--dir, every file mode 0600:

  ca.pem, ca-key.pem          the CA; clients trust it with --nats-tls-ca
  server.pem, server-key.pem  the servers' certificate (client and route ports alike)
  client.pem, client-key.pem  a client certificate, for servers run with --tls-verify

What exists is kept; the servers' certificate is made again (by the same CA) when it
does not cover every --host, and any certificate within 30 days of its end.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			all := hosts
			if !only {
				all = append(slices.Clone(defaultCertHosts), hosts...)
			}
			made, err := makeCertificates(dir, all)
			if err != nil {
				return err
			}
			if len(made) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "certs: %s is complete; nothing made\n", dir)
			}
			for _, f := range made {
				fmt.Fprintf(cmd.OutOrStdout(), "certs: made %s\n", f)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", dir, "where the CA and certificates are kept (env TOOLGATE_CERTS_DIR)")
	cmd.Flags().StringSliceVar(&hosts, "host", envList("TOOLGATE_CERTS_HOSTS"), "a name or address the servers' certificate must also be valid for (repeatable; env TOOLGATE_CERTS_HOSTS, comma-separated)")
	cmd.Flags().BoolVar(&only, "only-hosts", false, "make the servers' certificate valid for the --host names alone, not the defaults too")
	return cmd
}
