package main

import (
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/edge"
)

// newApprovalsCmd lists the calls waiting for a person's approval and decides them.
func newApprovalsCmd() *cobra.Command {
	decide := func(decision, short string) func(*adminClient) *cobra.Command {
		return func(c *adminClient) *cobra.Command {
			var reason string
			cmd := &cobra.Command{Use: decision + " ID", Short: short, Args: cobra.ExactArgs(1),
				RunE: func(cmd *cobra.Command, args []string) error {
					return c.print(cmd, http.MethodPost, "/approvals/"+url.PathEscape(args[0]),
						edge.ApprovalDecision{Decision: decision, Reason: reason})
				}}
			cmd.Flags().StringVar(&reason, "reason", "", "why, for the caller and the audit trail")
			return cmd
		}
	}
	return adminCmd("approvals", "List the calls waiting for a person's approval, and approve or deny them",
		func(c *adminClient) *cobra.Command {
			var account string
			cmd := &cobra.Command{Use: "list", Short: "List the pending approvals, oldest first", Args: cobra.NoArgs,
				RunE: func(cmd *cobra.Command, _ []string) error {
					path := "/approvals"
					if account != "" {
						path += "?account=" + url.QueryEscape(account)
					}
					return c.print(cmd, http.MethodGet, path, nil)
				}}
			cmd.Flags().StringVar(&account, "account", "", "only this account's")
			return cmd
		},
		func(c *adminClient) *cobra.Command {
			return &cobra.Command{Use: "show ID", Short: "Show one approval, pending or decided", Args: cobra.ExactArgs(1),
				RunE: func(cmd *cobra.Command, args []string) error {
					return c.print(cmd, http.MethodGet, "/approvals/"+url.PathEscape(args[0]), nil)
				}}
		},
		decide(edge.DecisionApprove, "Approve a pending call: it runs, once"),
		decide(edge.DecisionDeny, "Deny a pending call: it fails with approval_denied"),
	)
}
