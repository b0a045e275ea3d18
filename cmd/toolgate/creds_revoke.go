package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/busauth"
)

func newCredsRevokeCmd(dir *string) *cobra.Command {
	var user, natsURL string
	var auth bus.ClientAuth
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "revoke (TOOL | --user PUBLIC_KEY)",
		Short: "Revoke a tool's credentials (every user issued for it) or one user; running servers apply it at once",
		Long: `Revoke every user issued for TOOL, or the one user --user names (any role), in
the toolgate account's JWT, and send the new JWT to the NATS servers through the
system account: each server disconnects the revoked users at once and refuses them
from then on, without a restart. Servers that are down take the JWT from the others
when they come back (or from --dir's server/ when they restart). Running it again
sends the JWT again.`,
		Example: `  toolgate creds revoke email --nats tls://nats-1:4222 --nats-tls-ca ca.pem
  toolgate creds revoke --user UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4`,
		Args: func(cmd *cobra.Command, args []string) error {
			if (len(args) == 1) == (user != "") {
				return errors.New("creds revoke: give a tool or --user, not both")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			tool := ""
			if len(args) == 1 {
				tool = args[0]
			}
			d, err := busauth.Open(*dir)
			if err != nil {
				return err
			}
			revoked, token, err := d.Revoke(tool, user)
			if err != nil {
				return err
			}
			if err := giveTreeToDirOwner(d.Dir()); err != nil { // the account's JWT and the record, rewritten
				return fmt.Errorf("creds revoke: %w", err)
			}
			out := cmd.OutOrStdout()
			for _, g := range revoked {
				fmt.Fprintf(out, "creds: revoked %s user %s (%s), issued %s\n", g.Role, g.User, g.Name, g.IssuedAt.Format(time.RFC3339))
			}
			if auth.Creds == "" {
				auth.Creds = d.CredsFile(busauth.RoleSystem)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			stored, err := pushAccount(ctx, natsURL, auth, token, cmd.ErrOrStderr())
			for _, s := range stored {
				if s.Err == nil {
					fmt.Fprintf(out, "creds: server %s applied it\n", s.Server)
				}
			}
			if err != nil {
				return fmt.Errorf("creds revoke: recorded in %s, but the servers were not told: %w; run the command again when they can be reached", d.Dir(), err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&user, "user", "", "revoke the one user with this public key (see toolgate creds list)")
	f.StringVar(&natsURL, "nats", envOr("TOOLGATE_NATS", "nats://127.0.0.1:4222"), "NATS server URL(s), comma-separated (env TOOLGATE_NATS)")
	addNATSAuthFlags(f, &auth)
	f.Lookup("nats-creds").Usage = "the system account user's credentials (default <dir>/creds/system.creds) (env TOOLGATE_NATS_CREDS)"
	f.DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for the servers")
	return cmd
}

// pushAccount sends the account JWT to the servers as the system account's user.
func pushAccount(ctx context.Context, url string, auth bus.ClientAuth, token string, logTo io.Writer) ([]busauth.Stored, error) {
	log := slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelWarn}))
	nc, _, stop, err := connectNATS(ctx, url, "toolgate-creds", auth, 0, log)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	defer stop()
	return busauth.Push(ctx, nc, token, 500*time.Millisecond)
}
