package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/busauth"
)

func newCredsListCmd(dir *string) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the credentials issued: role, tools, user, when, revoked",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := busauth.Open(*dir)
			if err != nil {
				return err
			}
			gs, err := d.Grants()
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if gs == nil {
					gs = []busauth.Grant{}
				}
				return enc.Encode(gs)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ROLE\tTOOLS\tUSER\tNAME\tISSUED\tEXPIRES\tREVOKED")
			for _, g := range gs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Role, dash(strings.Join(g.Tools, ",")), g.User, g.Name,
					g.IssuedAt.Format(time.RFC3339), timeOrDash(g.ExpiresAt), timeOrDash(g.RevokedAt))
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the record as JSON")
	return cmd
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
