package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/install"
)

// defaultBaseURL is the edge of `toolgate dev`.
const defaultBaseURL = "http://127.0.0.1:8080"

// installConfig is what `toolgate install` and `toolgate uninstall` act on.
type installConfig struct {
	BaseURL string
	Client  string
	Scope   string
	Name    string
	DryRun  bool
}

func defaultInstallConfig() installConfig {
	base := os.Getenv("TOOLGATE_BASE_URL")
	if base == "" {
		base = defaultBaseURL
	}
	return installConfig{BaseURL: base, Scope: string(install.ScopeUser)}
}

var toolIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// target validates the configuration and finds the file to edit.
func (c installConfig) target(toolID string) (install.Target, error) {
	if !toolIDPattern.MatchString(toolID) {
		return install.Target{}, fmt.Errorf("tool-id %q: must match %s", toolID, toolIDPattern)
	}
	if c.Client == "" {
		return install.Target{}, errors.New("client: required (toolgate install --list-clients lists them)")
	}
	client, err := install.Lookup(c.Client)
	if err != nil {
		return install.Target{}, fmt.Errorf("client: %w", err)
	}
	scope, err := install.ParseScope(c.Scope)
	if err != nil {
		return install.Target{}, err
	}
	env, err := install.CurrentEnv()
	if err != nil {
		return install.Target{}, err
	}
	return install.NewTarget(client, scope, env)
}

// name is the entry's name: --name, or the tool id.
func (c installConfig) name(toolID string) string {
	if c.Name != "" {
		return c.Name
	}
	return toolID
}

func newInstallCmd() *cobra.Command {
	cfg := defaultInstallConfig()
	var listClients bool
	cmd := &cobra.Command{
		Use:   "install <tool-id> <api-key> --client <name>",
		Short: "Write one tool into one MCP client's configuration",
		Long: `Install asks the gateway for the tool's link with the API key, then adds that one
tool (not the whole gateway) to the client's configuration. Other servers, settings
and comments in the file are kept; the previous file is saved as <file>.bak.
Clients that only start stdio servers get a "toolgate connect <link>" command.`,
		Example: `  toolgate install email tg_xxx --client cursor
  toolgate install email tg_xxx --client vscode --scope project --dry-run
  toolgate install --list-clients`,
		Args: func(cmd *cobra.Command, args []string) error {
			if listClients {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(2)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if listClients {
				return printClients(cmd.OutOrStdout())
			}
			if err := runInstall(cmd.Context(), cmd.OutOrStdout(), cfg, args[0], args[1]); err != nil {
				return fmt.Errorf("install: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Client, "client", "", "the MCP client to configure (see --list-clients)")
	f.StringVar(&cfg.BaseURL, "base-url", cfg.BaseURL, "the gateway's address (env TOOLGATE_BASE_URL)")
	f.StringVar(&cfg.Scope, "scope", cfg.Scope, "user, or project for the configuration in the current directory")
	f.StringVar(&cfg.Name, "name", "", "the name to list the tool under (default: the tool id)")
	f.BoolVar(&cfg.DryRun, "dry-run", false, "print what would be written, and where, without writing it")
	f.BoolVar(&listClients, "list-clients", false, "list the supported clients and where their configuration is")
	return cmd
}

func runInstall(ctx context.Context, out io.Writer, cfg installConfig, toolID, apiKey string) error {
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return fmt.Errorf("base-url %q: must be an absolute http(s) URL", cfg.BaseURL)
	}
	if apiKey == "" {
		return errors.New("api-key: required")
	}
	target, err := cfg.target(toolID)
	if err != nil {
		return err
	}
	tool, err := fetchTool(ctx, base, toolID, apiKey)
	if err != nil {
		return err
	}
	if tool.MCPURL == "" {
		return fmt.Errorf("the gateway gave no MCP link for tool %q", toolID)
	}
	exe, err := os.Executable()
	if err != nil {
		exe = "toolgate"
	}
	description := tool.Description
	if description == "" {
		description = tool.Title
	}
	entry := install.Entry{
		Name:        cfg.name(toolID),
		URL:         tool.MCPURL,
		Description: description,
		Command:     exe,
		Args:        []string{"connect", tool.MCPURL},
	}
	ch, err := target.Install(entry)
	if err != nil {
		return err
	}
	title := target.Client.Title()
	if cfg.DryRun {
		if ch.Empty() {
			fmt.Fprintf(out, "%s already lists %q as it should be; nothing would change.\n", ch.Path, entry.Name)
			return nil
		}
		fmt.Fprintf(out, "Would write %s:\n%s", ch.Path, ch.After)
		return nil
	}
	if ch.Empty() {
		fmt.Fprintf(out, "%q is already installed in %s (%s); nothing changed.\n", entry.Name, title, ch.Path)
		return nil
	}
	backup, err := ch.Apply()
	if err != nil {
		return err
	}
	label := tool.ID
	if tool.Title != "" {
		label = fmt.Sprintf("%s (%s)", tool.ID, tool.Title)
	}
	fmt.Fprintf(out, "Installed tool %s in %s as %q.\n", label, title, entry.Name)
	fmt.Fprintf(out, "  wrote %s\n", ch.Path)
	if backup != "" {
		fmt.Fprintf(out, "  previous version saved as %s\n", backup)
	}
	if tool.Status != "" && tool.Status != "online" {
		fmt.Fprintf(out, "Note: the tool is %s right now; calls will fail until one of its workers runs.\n", tool.Status)
	}
	fmt.Fprintf(out, "Restart %s, or reload its MCP servers, to use it.\n", title)
	return nil
}

// toolRecord is what install reads of the gateway's answer to GET /tools/{tool}.
type toolRecord struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Status      string `json:"status"`
	MCPURL      string `json:"mcp_url"`
}

// gatewayError is the gateway's error envelope.
type gatewayError struct {
	Status    int
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id"`
}

func (e *gatewayError) Error() string {
	s := fmt.Sprintf("the gateway refused: %s (%s, HTTP %d", e.Message, e.Code, e.Status)
	if e.RequestID != "" {
		s += ", request id " + e.RequestID
	}
	return s + ")"
}

// fetchTool asks the gateway for one tool with the account's key.
func fetchTool(ctx context.Context, base *url.URL, toolID, apiKey string) (*toolRecord, error) {
	u := base.JoinPath("tools", toolID)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	// The header name as the gateway documents it; Go would otherwise send it
	// canonicalized, which means the same but reads differently in proxies' logs.
	req.Header["SERVICE_API_KEY"] = []string{apiKey}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the gateway at %s: %w", base.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the gateway's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var envelope struct {
			Error *gatewayError `json:"error"`
		}
		if json.Unmarshal(body, &envelope) == nil && envelope.Error != nil && envelope.Error.Message != "" {
			envelope.Error.Status = resp.StatusCode
			return nil, envelope.Error
		}
		return nil, fmt.Errorf("the gateway answered %s", resp.Status)
	}
	var tool toolRecord
	if err := json.Unmarshal(body, &tool); err != nil {
		return nil, fmt.Errorf("the gateway's answer is not a tool record: %w", err)
	}
	return &tool, nil
}

// printClients lists the clients and where their configuration is on this machine.
func printClients(out io.Writer) error {
	env, err := install.CurrentEnv()
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CLIENT\tNAME\tSCOPES\tUSER CONFIGURATION")
	for _, c := range install.Clients() {
		var scopes []string
		for _, s := range install.Scopes(c, env) {
			scopes = append(scopes, string(s))
		}
		p, err := c.Path(env, install.ScopeUser)
		if err != nil {
			p = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", c.Name(), c.Title(), strings.Join(scopes, ","), p)
	}
	return w.Flush()
}
