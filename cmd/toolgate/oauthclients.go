package main

import (
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/edge"
)

// newOAuthClientsCmd is `toolgate oauth-clients`: the clients the operator registers
// with the deployment's own authorization server, for MCP clients that take neither
// client ID metadata documents nor dynamic registration.
func newOAuthClientsCmd() *cobra.Command {
	return adminCmd("oauth-clients", "Register, list and delete the OAuth clients of the deployment's authorization server",
		func(c *adminClient) *cobra.Command {
			var req edge.OAuthClientRequest
			cmd := &cobra.Command{
				Use: "add CLIENT_ID --redirect-uri URI", Args: cobra.ExactArgs(1),
				Short: "Register a client; a confidential one's secret is shown this once",
				RunE: func(cmd *cobra.Command, args []string) error {
					req.ClientID = args[0]
					return c.print(cmd, http.MethodPost, "/oauth/clients", req)
				},
			}
			cmd.Flags().StringVar(&req.ClientName, "name", "", "the name the consent page shows")
			cmd.Flags().StringSliceVar(&req.RedirectURIs, "redirect-uri", nil, "where the client receives its authorization responses (repeat; required)")
			cmd.Flags().BoolVar(&req.Confidential, "confidential", false, "give the client a secret it authenticates with at the token endpoint (client_secret_basic or client_secret_post); without, a public client (PKCE only)")
			_ = cmd.MarkFlagRequired("redirect-uri")
			return cmd
		},
		func(c *adminClient) *cobra.Command {
			return &cobra.Command{Use: "list", Short: "List the registered clients (never their secrets)", Args: cobra.NoArgs,
				RunE: func(cmd *cobra.Command, _ []string) error { return c.print(cmd, http.MethodGet, "/oauth/clients", nil) }}
		},
		func(c *adminClient) *cobra.Command {
			return &cobra.Command{Use: "delete CLIENT_ID", Short: "Delete a client: it begins no authorization and refreshes no token from then on", Args: cobra.ExactArgs(1),
				RunE: func(cmd *cobra.Command, args []string) error {
					return c.print(cmd, http.MethodDelete, "/oauth/clients/"+url.PathEscape(args[0]), nil)
				}}
		},
	)
}
