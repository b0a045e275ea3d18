package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/registry"
)

// adminClient calls an edge's admin API for the accounts, keys, tools and links
// commands, and prints what it answers as indented JSON.
type adminClient struct {
	URL     string
	Key     string
	KeyFile string
	http    *http.Client
}

// adminEnv maps the admin commands' shared flags to their variables.
var adminEnv = map[string]string{
	"url":            "TOOLGATE_URL",
	"admin-key":      "TOOLGATE_ADMIN_KEY",
	"admin-key-file": "TOOLGATE_ADMIN_KEY_FILE",
}

// defaultAdminKeyFile is where `toolgate dev` keeps its admin key.
var defaultAdminKeyFile = filepath.Join(".toolgate", "admin-key")

// adminCmd makes one noun's command, whose subcommands share the admin API flags.
func adminCmd(use, short string, sub ...func(*adminClient) *cobra.Command) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short}
	c := withAdminFlags(cmd)
	for _, s := range sub {
		cmd.AddCommand(s(c))
	}
	return cmd
}

// withAdminFlags gives cmd (and its subcommands) the admin API's flags and help, and
// returns the client they set.
func withAdminFlags(cmd *cobra.Command) *adminClient {
	c := &adminClient{URL: "http://127.0.0.1:8080", http: &http.Client{Timeout: 30 * time.Second}}
	more := cmd.Long
	cmd.Long = cmd.Short + `, through an edge's admin API.

The admin key comes from --admin-key, TOOLGATE_ADMIN_KEY, --admin-key-file,
TOOLGATE_ADMIN_KEY_FILE or, failing those, ` + defaultAdminKeyFile + ` (where toolgate dev keeps it).
Prefer the variable or the file: a flag's value is visible to other users of the machine.`
	if more != "" {
		cmd.Long += "\n\n" + more
	}
	cmd.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		return flagsFromEnv(cmd.Flags(), adminEnv)
	}
	f := cmd.PersistentFlags()
	f.StringVar(&c.URL, "url", c.URL, "the edge's URL")
	f.StringVar(&c.Key, "admin-key", "", "the admin key")
	f.StringVar(&c.KeyFile, "admin-key-file", "", "file holding the admin key")
	return c
}

func newAccountsCmd() *cobra.Command {
	return adminCmd("accounts", "Create, update, list, show and delete accounts, and show their quotas' usage",
		func(c *adminClient) *cobra.Command {
			var req edge.AccountRequest
			cmd := &cobra.Command{
				Use: "create ID", Short: "Create an account", Args: cobra.ExactArgs(1),
				RunE: func(cmd *cobra.Command, args []string) error {
					req.ID = args[0]
					return c.print(cmd, http.MethodPost, "/accounts", req)
				},
			}
			cmd.Flags().StringVar(&req.Name, "name", "", "the account's name")
			cmd.Flags().Float64Var(&req.Limits.Rate, "rate", 0, "tool calls per second per key (0: the edge's default)")
			cmd.Flags().IntVar(&req.Limits.Burst, "burst", 0, "calls a key may make at once above the rate (0: the edge's default)")
			cmd.Flags().IntVar(&req.Limits.Sessions, "sessions", 0, "concurrent MCP sessions (0: the default)")
			return cmd
		},
		newAccountsUpdateCmd,
		func(c *adminClient) *cobra.Command {
			return &cobra.Command{Use: "list", Short: "List the accounts", Args: cobra.NoArgs,
				RunE: func(cmd *cobra.Command, _ []string) error { return c.print(cmd, http.MethodGet, "/accounts", nil) }}
		},
		func(c *adminClient) *cobra.Command {
			return &cobra.Command{Use: "show ID", Short: "Show one account", Args: cobra.ExactArgs(1),
				RunE: func(cmd *cobra.Command, args []string) error {
					return c.print(cmd, http.MethodGet, "/accounts/"+url.PathEscape(args[0]), nil)
				}}
		},
		func(c *adminClient) *cobra.Command {
			return &cobra.Command{Use: "usage ID", Short: "Show what an account used of its quotas in the current windows", Args: cobra.ExactArgs(1),
				RunE: func(cmd *cobra.Command, args []string) error {
					return c.print(cmd, http.MethodGet, "/usage?account="+url.QueryEscape(args[0]), nil)
				}}
		},
		func(c *adminClient) *cobra.Command {
			return &cobra.Command{Use: "delete ID", Short: "Delete an account with its keys, connections and links", Args: cobra.ExactArgs(1),
				RunE: func(cmd *cobra.Command, args []string) error {
					return c.print(cmd, http.MethodDelete, "/accounts/"+url.PathEscape(args[0]), nil)
				}}
		},
	)
}

func newKeysCmd() *cobra.Command {
	return adminCmd("keys", "Create, list and revoke API keys",
		func(c *adminClient) *cobra.Command {
			var req edge.KeyRequest
			var expiresIn time.Duration
			cmd := &cobra.Command{
				Use: "create ACCOUNT", Short: "Create a key; it is shown this once", Args: cobra.ExactArgs(1),
				RunE: func(cmd *cobra.Command, args []string) error {
					req.Account = args[0]
					if expiresIn > 0 {
						t := time.Now().Add(expiresIn).UTC()
						req.ExpiresAt = &t
					}
					return c.print(cmd, http.MethodPost, "/keys", req)
				},
			}
			cmd.Flags().StringVar(&req.Name, "name", "", "what the key is for")
			cmd.Flags().StringSliceVar(&req.Scopes, "scope", nil, "a tool the key may call (repeat; none: every tool of the account)")
			cmd.Flags().DurationVar(&expiresIn, "expires-in", 0, "how long the key lives (0: until revoked)")
			return cmd
		},
		func(c *adminClient) *cobra.Command {
			return &cobra.Command{Use: "list [ACCOUNT]", Short: "List keys (their prefixes; never the keys)", Args: cobra.MaximumNArgs(1),
				RunE: func(cmd *cobra.Command, args []string) error {
					path := "/keys"
					if len(args) == 1 {
						path += "?account=" + url.QueryEscape(args[0])
					}
					return c.print(cmd, http.MethodGet, path, nil)
				}}
		},
		func(c *adminClient) *cobra.Command {
			return &cobra.Command{Use: "revoke KEY_ID", Short: "Revoke a key on every edge", Args: cobra.ExactArgs(1),
				RunE: func(cmd *cobra.Command, args []string) error {
					return c.print(cmd, http.MethodDelete, "/keys/"+url.PathEscape(args[0]), nil)
				}}
		},
	)
}

func newToolsCmd() *cobra.Command {
	return adminCmd("tools", "Show deployed tools and connect them to accounts",
		func(c *adminClient) *cobra.Command {
			return &cobra.Command{Use: "show TOOL", Short: "Show a deployed tool: status, instances, methods", Args: cobra.ExactArgs(1),
				RunE: func(cmd *cobra.Command, args []string) error {
					return c.print(cmd, http.MethodGet, "/tools/"+url.PathEscape(args[0]), nil)
				}}
		},
		func(c *adminClient) *cobra.Command {
			return &cobra.Command{Use: "list ACCOUNT", Short: "List the tools connected to an account, with their links", Args: cobra.ExactArgs(1),
				RunE: func(cmd *cobra.Command, args []string) error {
					return c.print(cmd, http.MethodGet, "/connections?account="+url.QueryEscape(args[0]), nil)
				}}
		},
		func(c *adminClient) *cobra.Command {
			return &cobra.Command{Use: "connect ACCOUNT TOOL", Short: "Make a tool available to an account and give it a link", Args: cobra.ExactArgs(2),
				RunE: func(cmd *cobra.Command, args []string) error {
					return c.print(cmd, http.MethodPost, "/connections", edge.ConnectionRequest{Account: args[0], Tool: args[1]})
				}}
		},
		func(c *adminClient) *cobra.Command {
			return &cobra.Command{Use: "disconnect ACCOUNT TOOL", Short: "Take a tool away from an account; its link dies", Args: cobra.ExactArgs(2),
				RunE: func(cmd *cobra.Command, args []string) error {
					return c.print(cmd, http.MethodDelete, connectionPath(args), nil)
				}}
		},
		toolsCredentialsCmd,
		toolsAuthorizeCmd,
		toolsOAuthClientCmd,
	)
}

func newLinksCmd() *cobra.Command {
	return adminCmd("links", "Show and rotate the SSE links of an account's tools",
		func(c *adminClient) *cobra.Command {
			return &cobra.Command{Use: "show ACCOUNT TOOL", Short: "Show a connection's links", Args: cobra.ExactArgs(2),
				RunE: func(cmd *cobra.Command, args []string) error {
					return c.print(cmd, http.MethodGet, connectionPath(args), nil)
				}}
		},
		func(c *adminClient) *cobra.Command {
			return &cobra.Command{Use: "rotate ACCOUNT TOOL", Short: "Give a connection a new link; the old one stops working", Args: cobra.ExactArgs(2),
				RunE: func(cmd *cobra.Command, args []string) error {
					return c.print(cmd, http.MethodPost, "/links/"+url.PathEscape(args[0])+"/"+url.PathEscape(args[1])+"/rotate", nil)
				}}
		},
	)
}

func connectionPath(args []string) string {
	return "/connections/" + url.PathEscape(args[0]) + "/" + url.PathEscape(args[1])
}

// adminKey finds the admin key: the flag or variable, else the file named by flag or
// variable, else the dev stack's file.
func (c *adminClient) adminKey() (string, error) {
	if c.Key != "" {
		return c.Key, nil
	}
	path := c.KeyFile
	if path == "" {
		path = defaultAdminKeyFile
	}
	key, err := readSecretFile(path)
	if errors.Is(err, fs.ErrNotExist) && c.KeyFile == "" {
		return "", errors.New("no admin key: set TOOLGATE_ADMIN_KEY or --admin-key-file")
	}
	return key, err
}

// print sends one admin request and prints the answer; an error answer becomes the
// command's error, with the envelope's code, message and details.
func (c *adminClient) print(cmd *cobra.Command, method, path string, body any) error {
	status, b, err := c.do(cmd.Context(), method, path, body)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if status == http.StatusNoContent {
		fmt.Fprintln(out, "done")
		return nil
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, b, "", "  ") != nil {
		_, err = out.Write(b)
		return err
	}
	pretty.WriteByte('\n')
	_, err = pretty.WriteTo(out)
	return err
}

// do sends one admin request and returns the answer's status and body; an error
// answer is an error (answerError).
func (c *adminClient) do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	key, err := c.adminKey()
	if err != nil {
		return 0, nil, err
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.URL, "/")+"/admin"+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, nil, err
	}
	if resp.StatusCode >= 400 {
		return resp.StatusCode, nil, answerError(resp.StatusCode, b)
	}
	return resp.StatusCode, b, nil
}

func answerError(status int, body []byte) error {
	var env edge.Envelope
	if json.Unmarshal(body, &env) != nil || env.Error.Code == "" {
		return fmt.Errorf("%d %s", status, http.StatusText(status))
	}
	msg := fmt.Sprintf("%s (%d): %s", env.Error.Code, status, env.Error.Message)
	for _, d := range env.Error.Details {
		var v registry.Violation
		if b, err := json.Marshal(d); err == nil && json.Unmarshal(b, &v) == nil && v.Message != "" {
			msg += fmt.Sprintf("\n  %s: %s", v.Pointer, v.Message)
		}
	}
	return errors.New(msg)
}
