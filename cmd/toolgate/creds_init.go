package main

import (
	"errors"
	"fmt"
	"io"
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

// credsInit is creds init's settings.
type credsInit struct {
	dir           *string
	certs, export string
	hosts         []string
	demo          bool
}

func newCredsInitCmd(dir *string) *cobra.Command {
	c := &credsInit{dir: dir, certs: envOr("TOOLGATE_CERTS_DIR", ""), export: envOr("TOOLGATE_EXPORT", ""),
		demo: envOr("TOOLGATE_CREDS_DEMO", "") == "true"}
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
		RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd.OutOrStdout()) },
	}
	f := cmd.Flags()
	f.StringVar(&c.certs, "certs", c.certs, "also make the CA and the certificates in this directory, as toolgate certs does (env TOOLGATE_CERTS_DIR; empty: none)")
	f.StringSliceVar(&c.hosts, "host", envList("TOOLGATE_CERTS_HOSTS"), "with --certs: a name or address the servers' certificate must also be valid for (repeatable; env TOOLGATE_CERTS_HOSTS, comma-separated)")
	f.BoolVar(&c.demo, "demo", c.demo, "also issue creds/demo.creds, the demo workers' credentials (tools email, echo, clock) (env TOOLGATE_CREDS_DEMO=true)")
	f.StringVar(&c.export, "export", c.export, "with --certs: copy the CA's certificate to this directory, for workers on other hosts (env TOOLGATE_EXPORT; empty: none)")
	return cmd
}

// run makes what is missing and says what it made, and how each role uses it.
func (c *credsInit) run(out io.Writer) error {
	d, made, err := busauth.Init(*c.dir)
	if err != nil {
		return err
	}
	for i, f := range made {
		made[i] = filepath.Join(d.Dir(), f)
	}
	if c.demo {
		m, err := issueDemoCreds(d)
		if err != nil {
			return err
		}
		made = append(made, m...)
	}
	if err := giveTreeToDirOwner(d.Dir()); err != nil {
		return fmt.Errorf("creds init: %w", err)
	}
	if c.certs != "" {
		m, err := c.certificates()
		if err != nil {
			return err
		}
		made = append(made, m...)
	}
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
}

// issueDemoCreds issues the demo workers' credentials unless they exist, and returns the
// file it made.
func issueDemoCreds(d *busauth.Deployment) ([]string, error) {
	path := d.CredsFile(demoCredsName)
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	creds, _, err := d.IssueWorker(devTools, demoCredsName, 0)
	if err != nil {
		return nil, err
	}
	if err := writeCreds(path, creds); err != nil {
		return nil, fmt.Errorf("creds init: %w", err)
	}
	return []string{path}, nil
}

// certificates makes the CA and certificates in --certs, and exports the CA's
// certificate when asked to; it returns the files it made.
func (c *credsInit) certificates() ([]string, error) {
	made, err := makeCertificates(c.certs, append(slices.Clone(defaultCertHosts), c.hosts...))
	if err != nil {
		return nil, err
	}
	if c.export != "" {
		m, err := exportFile(filepath.Join(c.certs, busauth.CAFile), filepath.Join(c.export, busauth.CAFile))
		if err != nil {
			return nil, fmt.Errorf("creds init: export: %w", err)
		}
		made = append(made, m...)
	}
	return made, nil
}
