package main

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/edge"
)

// newAccountsUpdateCmd changes an account's name or limits while the edges run: only
// the flags given are sent, so the others keep their values.
func newAccountsUpdateCmd(c *adminClient) *cobra.Command {
	var (
		name           string
		rate           float64
		burst, session int
	)
	cmd := &cobra.Command{
		Use:   "update ID",
		Short: "Change an account's name or limits; every edge applies a new limit within seconds",
		Long: `Change an account's name or limits. Only the flags given change; a limit set to 0
is the edge's default again. Every edge applies a changed limit to its next call
once its view of the registry has it, within about a second.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var u edge.AccountUpdate
			f := cmd.Flags()
			if f.Changed("name") {
				u.Name = edge.Value(name)
			}
			if f.Changed("rate") {
				u.Limits.Value.Rate = edge.Value(rate)
			}
			if f.Changed("burst") {
				u.Limits.Value.Burst = edge.Value(burst)
			}
			if f.Changed("sessions") {
				u.Limits.Value.Sessions = edge.Value(session)
			}
			u.Limits.Set = !u.Limits.Value.Rate.IsZero() || !u.Limits.Value.Burst.IsZero() || !u.Limits.Value.Sessions.IsZero()
			if u.Name.IsZero() && u.Limits.IsZero() {
				return errors.New("accounts update: nothing to change: give --name, --rate, --burst or --sessions")
			}
			return c.print(cmd, http.MethodPatch, "/accounts/"+url.PathEscape(args[0]), u)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the account's name")
	cmd.Flags().Float64Var(&rate, "rate", 0, "tool calls per second per key (0: the edge's default)")
	cmd.Flags().IntVar(&burst, "burst", 0, "calls a key may make at once above the rate (0: the edge's default)")
	cmd.Flags().IntVar(&session, "sessions", 0, "concurrent MCP sessions (0: the default)")
	return cmd
}
