package install

import (
	"errors"
	"fmt"
)

// A Client is one MCP client: where it keeps its servers and how it writes one. The
// clients are the values below, each as its documentation describes it; a client
// differs from the others only in its fields, and in code only where its entry has a
// shape of its own. Entries point at the tool's Streamable HTTP link, except Claude
// Desktop's, which can only start stdio servers and so runs `toolgate connect <link>`.
type Client struct {
	name    string   // what --client takes, e.g. "claude-desktop"
	title   string   // how people call it, e.g. "Claude Desktop"
	aliases []string // other names people use for it

	user    func(Env) string // the user's configuration file
	project []string         // the project's, below the project directory; nil when it has none

	format  fileFormat
	servers string            // the key (or table) the servers are under
	entry   func(e Entry) any // e as the client's entry for it
	// stdio is set for a client that only starts commands: its entries need
	// e.Command, the others' e.URL.
	stdio bool
}

// Cursor reads ~/.cursor/mcp.json and a project's .cursor/mcp.json, with servers
// under "mcpServers"; a remote one has a "url" (cursor.com/docs/mcp).
var Cursor = Client{
	name: "cursor", title: "Cursor",
	user:    under(Env.home, ".cursor", "mcp.json"),
	project: []string{".cursor", "mcp.json"},
	format:  jsonFile, servers: "mcpServers",
	entry: plainURL,
}

// ClaudeDesktop reads claude_desktop_config.json in its application-support
// directory (modelcontextprotocol.io quickstart; ~/.config/Claude on Linux, where
// there is no official build). Its servers under "mcpServers" are stdio commands only.
var ClaudeDesktop = Client{
	name: "claude-desktop", title: "Claude Desktop", aliases: []string{"claude", "claudedesktop"},
	user: onOS{
		darwin:  under(Env.home, "Library", "Application Support", "Claude", "claude_desktop_config.json"),
		windows: under(Env.appData, "Claude", "claude_desktop_config.json"),
		other:   under(Env.configDir, "Claude", "claude_desktop_config.json"),
	}.path,
	format: jsonFile, servers: "mcpServers",
	entry: func(e Entry) any { return stdioEntry{Command: e.Command, Args: e.Args} },
	stdio: true,
}

// ClaudeCode keeps user-scope servers under "mcpServers" in ~/.claude.json and
// project ones in the project's .mcp.json; a remote one is {"type": "http", "url"}
// (code.claude.com/docs/en/mcp).
var ClaudeCode = Client{
	name: "claude-code", title: "Claude Code", aliases: []string{"claudecode"},
	user:    under(Env.home, ".claude.json"),
	project: []string{".mcp.json"},
	format:  jsonFile, servers: "mcpServers",
	entry: typedURL("http"),
}

// VSCode reads mcp.json in the user profile and a workspace's .vscode/mcp.json, with
// servers under "servers"; a remote one is {"type": "http", "url"}
// (code.visualstudio.com/docs/copilot/reference/mcp-configuration).
var VSCode = Client{
	name: "vscode", title: "VS Code", aliases: []string{"code", "vs-code"},
	user:    under(Env.vscodeUserDir, "mcp.json"),
	project: []string{".vscode", "mcp.json"},
	format:  jsonFile, servers: "servers",
	entry: typedURL("http"),
}

// Windsurf reads ~/.codeium/windsurf/mcp_config.json, with servers under
// "mcpServers"; a remote one has a "serverUrl" (docs.windsurf.com/windsurf/cascade/mcp).
var Windsurf = Client{
	name: "windsurf", title: "Windsurf",
	user:   under(Env.home, ".codeium", "windsurf", "mcp_config.json"),
	format: jsonFile, servers: "mcpServers",
	entry: func(e Entry) any { return windsurfEntry{ServerURL: e.URL} },
}

// Cline, the VS Code extension, reads cline_mcp_settings.json in its global
// storage, with servers under "mcpServers". A server with only a "url" is taken for
// legacy SSE, so the entry says "type": "streamableHttp" (src/services/mcp/schemas.ts).
var Cline = Client{
	name: "cline", title: "Cline",
	user:   under(Env.vscodeUserDir, "globalStorage", "saoudrizwan.claude-dev", "settings", "cline_mcp_settings.json"),
	format: jsonFile, servers: "mcpServers",
	entry: typedURL("streamableHttp"),
}

// RooCode, the VS Code extension, reads mcp_settings.json in its global storage and
// a project's .roo/mcp.json, with servers under "mcpServers"; a remote one is
// {"type": "streamable-http", "url"} (docs.roocode.com/features/mcp/using-mcp-in-roo).
var RooCode = Client{
	name: "roo-code", title: "Roo Code", aliases: []string{"roo", "roocode"},
	user:    under(Env.vscodeUserDir, "globalStorage", "rooveterinaryinc.roo-cline", "settings", "mcp_settings.json"),
	project: []string{".roo", "mcp.json"},
	format:  jsonFile, servers: "mcpServers",
	entry: typedURL("streamable-http"),
}

// GeminiCLI reads ~/.gemini/settings.json and a project's .gemini/settings.json,
// with servers under "mcpServers"; a Streamable HTTP one has an "httpUrl" ("url"
// would mean SSE) (google-gemini/gemini-cli docs/tools/mcp-server.md).
var GeminiCLI = Client{
	name: "gemini-cli", title: "Gemini CLI", aliases: []string{"gemini"},
	user:    under(Env.home, ".gemini", "settings.json"),
	project: []string{".gemini", "settings.json"},
	format:  jsonFile, servers: "mcpServers",
	entry: func(e Entry) any { return geminiEntry{HTTPURL: e.URL} },
}

// Codex reads $CODEX_HOME/config.toml (~/.codex by default) and, in a trusted
// project, .codex/config.toml; each server is a [mcp_servers.<name>] table, a
// Streamable HTTP one with a "url" (developers.openai.com/codex/mcp).
var Codex = Client{
	name: "codex", title: "Codex", aliases: []string{"codex-cli"},
	user:    under(Env.codexHome, "config.toml"),
	project: []string{".codex", "config.toml"},
	format:  tomlFile, servers: "mcp_servers",
	entry: func(e Entry) any { return []tomlField{{"url", e.URL}} },
}

// Zed reads settings.json in its configuration directory (~/.config/zed on Linux
// and macOS, %APPDATA%\Zed on Windows: crates/paths) and a project's
// .zed/settings.json, with servers under "context_servers"; a remote one has a
// "url" (zed.dev/docs/ai/mcp).
var Zed = Client{
	name: "zed", title: "Zed",
	user: onOS{
		darwin:  under(Env.home, ".config", "zed", "settings.json"),
		windows: under(Env.appData, "Zed", "settings.json"),
		other:   under(Env.configDir, "zed", "settings.json"),
	}.path,
	project: []string{".zed", "settings.json"},
	format:  jsonFile, servers: "context_servers",
	entry: plainURL,
}

// Goose reads config.yaml (~/.config/goose, %APPDATA%\Block\goose\config on
// Windows), with servers under "extensions"; a remote one has type
// streamable_http and a "uri" (block/goose documentation/docs/guides/config-files.md).
var Goose = Client{
	name: "goose", title: "goose",
	user: onOS{
		windows: under(Env.appData, "Block", "goose", "config", "config.yaml"),
		other:   under(Env.configDir, "goose", "config.yaml"),
	}.path,
	format: yamlFile, servers: "extensions",
	entry: func(e Entry) any {
		return gooseEntry{Enabled: true, Type: "streamable_http", Name: e.Name, Description: e.Description, URI: e.URL, Timeout: 300}
	},
}

// Clients lists every supported client, in the order --list-clients shows them.
func Clients() []Client {
	return []Client{Cursor, ClaudeDesktop, ClaudeCode, VSCode, Windsurf, Cline, RooCode, GeminiCLI, Codex, Zed, Goose}
}

// Name is what --client takes, e.g. "claude-desktop".
func (c Client) Name() string { return c.name }

// Title is how people call the client, e.g. "Claude Desktop".
func (c Client) Title() string { return c.title }

// Path is the configuration file for scope, or ErrNoProjectScope.
func (c Client) Path(env Env, scope Scope) (string, error) {
	if scope != ScopeProject {
		return c.user(env), nil
	}
	if c.project == nil {
		return "", ErrNoProjectScope
	}
	return env.join(append([]string{env.Project}, c.project...)...), nil
}

// Add puts e into file, replacing an entry of the same name. Add and Remove are
// pure: they take the file's bytes (nil when there is no file) and return the new
// bytes, the same bytes when there is nothing to change.
func (c Client) Add(file []byte, e Entry) ([]byte, error) {
	if err := e.check(c.stdio); err != nil {
		return nil, err
	}
	return c.format.add(file, c.servers, e.Name, c.entry(e))
}

// Remove takes the entry called name out of file.
func (c Client) Remove(file []byte, name string) ([]byte, error) {
	return c.format.remove(file, c.servers, name)
}

// fileFormat is how a kind of configuration file is edited: servers.name is set to
// an entry, or taken out.
type fileFormat struct {
	add    func(file []byte, servers, name string, entry any) ([]byte, error)
	remove func(file []byte, servers, name string) ([]byte, error)
}

var (
	jsonFile = fileFormat{add: addJSON, remove: removeJSON}
	yamlFile = fileFormat{add: addYAML, remove: removeYAML}
	// tomlFile's entries are the fields of the server's table (Codex's entry).
	tomlFile = fileFormat{
		add: func(file []byte, table, name string, entry any) ([]byte, error) {
			return addTOML(file, table, name, entry.([]tomlField))
		},
		remove: removeTOML,
	}
)

// under is the file at elem below the directory dir gives.
func under(dir func(Env) string, elem ...string) func(Env) string {
	return func(env Env) string { return env.join(append([]string{dir(env)}, elem...)...) }
}

// onOS is a file whose place differs by operating system: other's where darwin or
// windows is nil.
type onOS struct{ darwin, windows, other func(Env) string }

func (o onOS) path(env Env) string {
	switch {
	case env.OS == "darwin" && o.darwin != nil:
		return o.darwin(env)
	case env.OS == "windows" && o.windows != nil:
		return o.windows(env)
	}
	return o.other(env)
}

// urlEntry is an entry with the link under "url".
type urlEntry struct {
	URL string `json:"url"`
}

func plainURL(e Entry) any { return urlEntry{URL: e.URL} }

// typedURLEntry is an entry that names its transport.
type typedURLEntry struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

// typedURL is an entry naming the transport as the client calls Streamable HTTP.
func typedURL(transport string) func(Entry) any {
	return func(e Entry) any { return typedURLEntry{Type: transport, URL: e.URL} }
}

// stdioEntry starts a command that speaks MCP on stdin and stdout.
type stdioEntry struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

type windsurfEntry struct {
	ServerURL string `json:"serverUrl"`
}

type geminiEntry struct {
	HTTPURL string `json:"httpUrl"`
}

type gooseEntry struct {
	Enabled     bool   `yaml:"enabled"`
	Type        string `yaml:"type"`
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	URI         string `yaml:"uri"`
	Timeout     int    `yaml:"timeout"`
}

// check refuses an entry a client could not reach the tool by.
func (e Entry) check(stdio bool) error {
	switch {
	case e.Name == "":
		return errors.New("entry has no name")
	case stdio && e.Command == "":
		return fmt.Errorf("entry %q has no command to start", e.Name)
	case !stdio && e.URL == "":
		return fmt.Errorf("entry %q has no link", e.Name)
	}
	return nil
}
