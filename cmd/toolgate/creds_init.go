package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/busauth"
)

// demoCredsName names the demo workers' credentials file that creds init --demo makes
// (creds/demo.creds) and their record.
const demoCredsName = "demo"

func newCredsInitCmd(dir *string) *cobra.Command {
	certs, export := envOr("TOOLGATE_CERTS_DIR", ""), envOr("TOOLGATE_EXPORT", "")
	var hosts []string
	demoCreds := envOr("TOOLGATE_CREDS_DEMO", "") == "true"
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Make the deployment's operator, accounts and role credentials; keeps what exists",
		Long: `Make what is missing of a deployment's bus security in --dir, keeping what exists
(running it again changes nothing):

  keys/           the operator's, the system account's and the toolgate account's seeds
  creds/          edge.creds, admin.creds (the admin and bootstrap role), system.creds
                  (pushes revocations to the servers); with --demo, demo.creds, the
                  demo workers' (tools email, echo and clock, as creds issue makes them)
  server/         operator.jwt and accounts/*.jwt for toolgate nats --auth, and
                  nats-server.conf to include from an official nats-server's configuration
                  (auth.conf, which it includes, alone for a server with a resolver of its own)
  issued.json     the record of every credentials issued (never a seed)

With --certs it makes the CA and certificates there too, as toolgate certs does, so
that a stack whose image has no shell sets its bus up in one step; --export copies the
CA's certificate (ca.pem, public) to a directory of the host's. Run as root, it gives
what it writes to the owner of the directory it writes into.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, made, err := busauth.Init(*dir)
			if err != nil {
				return err
			}
			for i, f := range made {
				made[i] = filepath.Join(d.Dir(), f)
			}
			if demoCreds {
				path := d.CredsFile(demoCredsName)
				if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
					creds, _, err := d.IssueWorker(devTools, demoCredsName, 0)
					if err != nil {
						return err
					}
					if err := writeCreds(path, creds); err != nil {
						return fmt.Errorf("creds init: %w", err)
					}
					made = append(made, path)
				}
			}
			if err := giveTreeToDirOwner(d.Dir()); err != nil {
				return fmt.Errorf("creds init: %w", err)
			}
			if certs != "" {
				m, err := makeCertificates(certs, append(slices.Clone(defaultCertHosts), hosts...))
				if err != nil {
					return err
				}
				made = append(made, m...)
				if export != "" {
					m, err := exportFile(filepath.Join(certs, busauth.CAFile), filepath.Join(export, busauth.CAFile))
					if err != nil {
						return fmt.Errorf("creds init: export: %w", err)
					}
					made = append(made, m...)
				}
			}
			out := cmd.OutOrStdout()
			if len(made) == 0 {
				fmt.Fprintf(out, "creds: %s is complete; nothing made\n", d.Dir())
			}
			for _, f := range made {
				fmt.Fprintf(out, "creds: made %s\n", f)
			}
			fmt.Fprintf(out, `
NATS nodes:   toolgate nats --auth %s ...
edges:        toolgate edge --nats-creds %s ...
a tool team:  toolgate creds issue TOOL -o TOOL.creds (and, if its workers keep
              state, toolgate state create TOOL with the admin's credentials)
`, d.ServerDir(), d.CredsFile(busauth.RoleEdge))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&certs, "certs", certs, "also make the CA and the certificates in this directory, as toolgate certs does (env TOOLGATE_CERTS_DIR; empty: none)")
	f.StringSliceVar(&hosts, "host", envList("TOOLGATE_CERTS_HOSTS"), "with --certs: a name or address the servers' certificate must also be valid for (repeatable; env TOOLGATE_CERTS_HOSTS, comma-separated)")
	f.BoolVar(&demoCreds, "demo", demoCreds, "also issue creds/demo.creds, the demo workers' credentials (tools email, echo, clock) (env TOOLGATE_CREDS_DEMO=true)")
	f.StringVar(&export, "export", export, "with --certs: copy the CA's certificate to this directory, for workers on other hosts (env TOOLGATE_EXPORT; empty: none)")
	return cmd
}
