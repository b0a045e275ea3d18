package main

import (
	"github.com/spf13/cobra"
)

// credsDirUsage describes --dir, which every creds subcommand shares.
const credsDirUsage = "the deployment's bus security directory: keys, credentials, server JWTs, the record of issued credentials (env TOOLGATE_CREDS_DIR)"

// defaultCredsDir is where the creds commands keep a deployment's bus security when
// neither --dir nor TOOLGATE_CREDS_DIR says.
const defaultCredsDir = "./.toolgate-auth"

// newCredsCmd groups the commands that make and manage the bus's credentials. They
// sign with the keys in the deployment's directory, not through an edge: they are
// the NATS operator's tools, kept apart from the admin API's accounts, keys and tools.
func newCredsCmd() *cobra.Command {
	dir := envOr("TOOLGATE_CREDS_DIR", defaultCredsDir)
	cmd := &cobra.Command{
		Use:   "creds",
		Short: "Make the bus's security and issue, list and revoke NATS credentials",
		Long: `Make a deployment's bus security (decentralized NATS JWT: an operator, a system
account, the toolgate account) and issue, list and revoke the credentials of the
roles on the bus. Everything is kept in one directory (--dir); its keys/ and creds/
are secrets (files 0600), its server/ is what the NATS nodes need (public).`,
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", dir, credsDirUsage)
	cmd.AddCommand(newCredsInitCmd(&dir), newCredsIssueCmd(&dir), newCredsListCmd(&dir), newCredsRevokeCmd(&dir))
	return cmd
}
