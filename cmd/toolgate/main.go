// Command toolgate is the gateway's one binary: every role (dev stack, edge, NATS node,
// worker, installer, administration) is a subcommand.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	// CA roots compiled in, used when the system has none: the image is FROM scratch,
	// and a worker bridging a remote MCP server must still verify its certificate.
	_ "golang.org/x/crypto/x509roots/fallback"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "toolgate:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "toolgate",
		Short:         "A gateway to an account's connected tools, over HTTP and MCP",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newVersionCmd(),
		newNATSCmd(),
		newDevCmd(),
		newEdgeCmd(),
		newAccountsCmd(),
		newKeysCmd(),
		newToolsCmd(),
		newLinksCmd(),
		newOAuthClientsCmd(),
		newUsersCmd(),
		newAuditCmd(),
		newApprovalsCmd(),
		newInstallCmd(),
		newUninstallCmd(),
		newConnectCmd(),
		newWorkerCmd(),
		newCredsCmd(),
		newCredentialsCmd(),
		newStateCmd(),
		newCertsCmd(),
		newBootstrapCmd(),
		newHealthCmd(),
	)
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the toolgate version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "toolgate", version)
		},
	}
}
