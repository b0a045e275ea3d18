package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
)

// toolsAuthorizeCmd is `toolgate tools authorize`: a connect URL for an OAuth
// connection, for use without the dashboard; whoever opens it in a browser and signs
// in at the provider connects the account.
func toolsAuthorizeCmd(c *adminClient) *cobra.Command {
	return &cobra.Command{Use: "authorize ACCOUNT TOOL", Args: cobra.ExactArgs(2),
		Short: "Print a URL that connects an account to a tool's OAuth provider, once, when opened in a browser",
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.print(cmd, http.MethodPost, connectionPath(args)+"/authorize", nil)
		}}
}

// toolsOAuthClientCmd is `toolgate tools oauth-client`: the secret of the client the
// deployment registered at a tool's OAuth provider, read from a file or standard
// input (never from the command line).
func toolsOAuthClientCmd(c *adminClient) *cobra.Command {
	cmd := &cobra.Command{Use: "oauth-client", Short: "Set or clear the secret of the client the deployment registered at a tool's OAuth provider"}
	var from string
	set := &cobra.Command{Use: "set TOOL --from-file FILE", Args: cobra.ExactArgs(1),
		Short: `Set the client secret from FILE (- for standard input): {"client_secret": "..."}`,
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := readValuesFile(cmd, from)
			if err != nil {
				return err
			}
			var v struct {
				ClientSecret *string `json:"client_secret"`
			}
			if json.Unmarshal(body, &v) != nil || v.ClientSecret == nil {
				return fmt.Errorf("oauth-client: %s: want {\"client_secret\": \"...\"}", from)
			}
			return c.print(cmd, http.MethodPut, oauthClientPath(args[0]), json.RawMessage(body))
		}}
	set.Flags().StringVar(&from, "from-file", "", `file holding {"client_secret": "..."}, - for standard input (required)`)
	_ = set.MarkFlagRequired("from-file")
	clearCmd := &cobra.Command{Use: "clear TOOL", Args: cobra.ExactArgs(1), Short: "Forget the client secret (a public client)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.print(cmd, http.MethodDelete, oauthClientPath(args[0]), nil)
		}}
	cmd.AddCommand(set, clearCmd)
	return cmd
}

func oauthClientPath(tool string) string { return "/tools/" + url.PathEscape(tool) + "/oauth-client" }
