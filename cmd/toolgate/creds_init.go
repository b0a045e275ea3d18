package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/busauth"
)

func newCredsInitCmd(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Make the deployment's operator, accounts and role credentials; keeps what exists",
		Long: `Make what is missing of a deployment's bus security in --dir, keeping what exists
(running it again changes nothing):

  keys/           the operator's, the system account's and the toolgate account's seeds
  creds/          edge.creds, admin.creds (the admin and bootstrap role), system.creds
                  (pushes revocations to the servers)
  server/         operator.jwt and accounts/*.jwt for toolgate nats --auth, and
                  nats-server.conf to include from an official nats-server's configuration
  issued.json     the record of every credentials issued (never a seed)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, made, err := busauth.Init(*dir)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(made) == 0 {
				fmt.Fprintf(out, "creds: %s is complete; nothing made\n", d.Dir())
			}
			for _, f := range made {
				fmt.Fprintf(out, "creds: made %s\n", filepath.Join(d.Dir(), f))
			}
			fmt.Fprintf(out, `
NATS nodes:   toolgate nats --auth %s ...
edges:        toolgate edge --nats-creds %s ...
a tool team:  toolgate creds issue TOOL -o TOOL.creds
`, d.ServerDir(), d.CredsFile(busauth.RoleEdge))
			return nil
		},
	}
}
