package main

import (
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/edge"
)

// newUsersCmd is `toolgate users`: the users of an account, who sign in to its
// dashboard and to its links.
func newUsersCmd() *cobra.Command {
	return adminCmd("users", "Make, list and delete the users of an account",
		func(c *adminClient) *cobra.Command {
			var req edge.UserRequest
			cmd := &cobra.Command{
				Use: "add ACCOUNT NAME [--subject SUBJECT]", Args: cobra.ExactArgs(2),
				Short: "Make a user; one without a subject gets a sign-in secret, shown this once",
				RunE: func(cmd *cobra.Command, args []string) error {
					req.Name = args[1]
					return c.print(cmd, http.MethodPost, usersPath(args[0]), req)
				},
			}
			cmd.Flags().StringVar(&req.Subject, "subject", "", "the user's subject at the deployment's identity provider (the claim --oidc-user-claim names): the user signs in there, with no secret")
			return cmd
		},
		func(c *adminClient) *cobra.Command {
			return &cobra.Command{Use: "list ACCOUNT", Short: "List an account's users (never a secret)", Args: cobra.ExactArgs(1),
				RunE: func(cmd *cobra.Command, args []string) error {
					return c.print(cmd, http.MethodGet, usersPath(args[0]), nil)
				}}
		},
		func(c *adminClient) *cobra.Command {
			return &cobra.Command{Use: "delete ACCOUNT NAME", Short: "Delete a user: its sign-ins, tokens and grants are refused on every edge from the answer on", Args: cobra.ExactArgs(2),
				RunE: func(cmd *cobra.Command, args []string) error {
					return c.print(cmd, http.MethodDelete, usersPath(args[0])+"/"+url.PathEscape(args[1]), nil)
				}}
		},
	)
}

func usersPath(account string) string { return "/accounts/" + url.PathEscape(account) + "/users" }
