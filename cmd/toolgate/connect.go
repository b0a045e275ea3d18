package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/connect"
)

func newConnectCmd() *cobra.Command {
	var headers []string
	cmd := &cobra.Command{
		Use:   "connect <link-url>",
		Short: "Serve MCP on stdin and stdout, relayed to a tool's link",
		Long: `Connect is a stdio MCP server for clients that cannot reach a URL themselves
(Claude Desktop, say). It relays every message to the link over Streamable HTTP,
or over legacy HTTP+SSE when the link does not speak Streamable HTTP, and exits
when the client closes its input. Logs go to stderr; stdout carries MCP only.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			header, err := parseHeaders("connect", headers)
			if err != nil {
				return err
			}
			return connect.Run(cmd.Context(), &mcp.StdioTransport{}, connect.Config{
				Link:   args[0],
				Header: header,
				Logger: slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil)),
			})
		},
	}
	cmd.Flags().StringArrayVarP(&headers, "header", "H", nil, "an HTTP header for every request to the link, as Name:Value (repeatable)")
	return cmd
}

// parseHeaders reads --header "Name: value" flags, for the command role names in its
// errors.
func parseHeaders(role string, flags []string) (http.Header, error) {
	h := http.Header{}
	for _, f := range flags {
		name, value, ok := strings.Cut(f, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf("%s: header: %q: must be \"Name: value\"", role, f)
		}
		h.Add(name, strings.TrimSpace(value))
	}
	return h, nil
}
