package install

import (
	"errors"
	"fmt"
)

// Each client below says where its documentation puts the configuration and what a
// remote server's entry looks like there. Entries point at the tool's Streamable
// HTTP link, except Claude Desktop's, which can only start stdio servers and so runs
// `toolgate connect <link>`.

// urlEntry is an entry with the link under "url".
type urlEntry struct {
	URL string `json:"url"`
}

// typedURLEntry is an entry that names its transport.
type typedURLEntry struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

// stdioEntry starts a command that speaks MCP on stdin and stdout.
type stdioEntry struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

func (e Entry) checkURL() error {
	if e.Name == "" {
		return errors.New("entry has no name")
	}
	if e.URL == "" {
		return fmt.Errorf("entry %q has no link", e.Name)
	}
	return nil
}

// Cursor reads ~/.cursor/mcp.json and a project's .cursor/mcp.json, with servers
// under "mcpServers"; a remote one has a "url" (cursor.com/docs/mcp).
type Cursor struct{}

func (Cursor) Name() string  { return "cursor" }
func (Cursor) Title() string { return "Cursor" }
func (Cursor) Path(env Env, scope Scope) (string, error) {
	if scope == ScopeProject {
		return env.join(env.Project, ".cursor", "mcp.json"), nil
	}
	return env.join(env.Home, ".cursor", "mcp.json"), nil
}
func (Cursor) Add(file []byte, e Entry) ([]byte, error) {
	if err := e.checkURL(); err != nil {
		return nil, err
	}
	return addJSON(file, "mcpServers", e.Name, urlEntry{URL: e.URL})
}
func (Cursor) Remove(file []byte, name string) ([]byte, error) {
	return removeJSON(file, "mcpServers", name)
}

// ClaudeDesktop reads claude_desktop_config.json in its application-support
// directory (modelcontextprotocol.io quickstart; ~/.config/Claude on Linux, where
// there is no official build). Its servers under "mcpServers" are stdio commands only.
type ClaudeDesktop struct{}

func (ClaudeDesktop) Name() string  { return "claude-desktop" }
func (ClaudeDesktop) Title() string { return "Claude Desktop" }
func (ClaudeDesktop) Path(env Env, scope Scope) (string, error) {
	if scope == ScopeProject {
		return "", ErrNoProjectScope
	}
	const file = "claude_desktop_config.json"
	switch env.OS {
	case "darwin":
		return env.join(env.Home, "Library", "Application Support", "Claude", file), nil
	case "windows":
		return env.join(env.appData(), "Claude", file), nil
	}
	return env.join(env.configDir(), "Claude", file), nil
}
func (ClaudeDesktop) Add(file []byte, e Entry) ([]byte, error) {
	if e.Name == "" {
		return nil, errors.New("entry has no name")
	}
	if e.Command == "" {
		return nil, fmt.Errorf("entry %q has no command to start", e.Name)
	}
	return addJSON(file, "mcpServers", e.Name, stdioEntry{Command: e.Command, Args: e.Args})
}
func (ClaudeDesktop) Remove(file []byte, name string) ([]byte, error) {
	return removeJSON(file, "mcpServers", name)
}

// ClaudeCode keeps user-scope servers under "mcpServers" in ~/.claude.json and
// project ones in the project's .mcp.json; a remote one is {"type": "http", "url"}
// (code.claude.com/docs/en/mcp).
type ClaudeCode struct{}

func (ClaudeCode) Name() string  { return "claude-code" }
func (ClaudeCode) Title() string { return "Claude Code" }
func (ClaudeCode) Path(env Env, scope Scope) (string, error) {
	if scope == ScopeProject {
		return env.join(env.Project, ".mcp.json"), nil
	}
	return env.join(env.Home, ".claude.json"), nil
}
func (ClaudeCode) Add(file []byte, e Entry) ([]byte, error) {
	if err := e.checkURL(); err != nil {
		return nil, err
	}
	return addJSON(file, "mcpServers", e.Name, typedURLEntry{Type: "http", URL: e.URL})
}
func (ClaudeCode) Remove(file []byte, name string) ([]byte, error) {
	return removeJSON(file, "mcpServers", name)
}

// VSCode reads mcp.json in the user profile and a workspace's .vscode/mcp.json, with
// servers under "servers"; a remote one is {"type": "http", "url"}
// (code.visualstudio.com/docs/copilot/reference/mcp-configuration).
type VSCode struct{}

func (VSCode) Name() string  { return "vscode" }
func (VSCode) Title() string { return "VS Code" }
func (VSCode) Path(env Env, scope Scope) (string, error) {
	if scope == ScopeProject {
		return env.join(env.Project, ".vscode", "mcp.json"), nil
	}
	return env.join(env.vscodeUserDir(), "mcp.json"), nil
}
func (VSCode) Add(file []byte, e Entry) ([]byte, error) {
	if err := e.checkURL(); err != nil {
		return nil, err
	}
	return addJSON(file, "servers", e.Name, typedURLEntry{Type: "http", URL: e.URL})
}
func (VSCode) Remove(file []byte, name string) ([]byte, error) {
	return removeJSON(file, "servers", name)
}

// Windsurf reads ~/.codeium/windsurf/mcp_config.json, with servers under
// "mcpServers"; a remote one has a "serverUrl" (docs.windsurf.com/windsurf/cascade/mcp).
type Windsurf struct{}

type windsurfEntry struct {
	ServerURL string `json:"serverUrl"`
}

func (Windsurf) Name() string  { return "windsurf" }
func (Windsurf) Title() string { return "Windsurf" }
func (Windsurf) Path(env Env, scope Scope) (string, error) {
	if scope == ScopeProject {
		return "", ErrNoProjectScope
	}
	return env.join(env.Home, ".codeium", "windsurf", "mcp_config.json"), nil
}
func (Windsurf) Add(file []byte, e Entry) ([]byte, error) {
	if err := e.checkURL(); err != nil {
		return nil, err
	}
	return addJSON(file, "mcpServers", e.Name, windsurfEntry{ServerURL: e.URL})
}
func (Windsurf) Remove(file []byte, name string) ([]byte, error) {
	return removeJSON(file, "mcpServers", name)
}

// Cline, the VS Code extension, reads cline_mcp_settings.json in its global
// storage, with servers under "mcpServers". A server with only a "url" is taken for
// legacy SSE, so the entry says "type": "streamableHttp" (src/services/mcp/schemas.ts).
type Cline struct{}

func (Cline) Name() string  { return "cline" }
func (Cline) Title() string { return "Cline" }
func (Cline) Path(env Env, scope Scope) (string, error) {
	if scope == ScopeProject {
		return "", ErrNoProjectScope
	}
	return env.join(env.vscodeUserDir(), "globalStorage", "saoudrizwan.claude-dev", "settings", "cline_mcp_settings.json"), nil
}
func (Cline) Add(file []byte, e Entry) ([]byte, error) {
	if err := e.checkURL(); err != nil {
		return nil, err
	}
	return addJSON(file, "mcpServers", e.Name, typedURLEntry{Type: "streamableHttp", URL: e.URL})
}
func (Cline) Remove(file []byte, name string) ([]byte, error) {
	return removeJSON(file, "mcpServers", name)
}

// RooCode, the VS Code extension, reads mcp_settings.json in its global storage and
// a project's .roo/mcp.json, with servers under "mcpServers"; a remote one is
// {"type": "streamable-http", "url"} (docs.roocode.com/features/mcp/using-mcp-in-roo).
type RooCode struct{}

func (RooCode) Name() string  { return "roo-code" }
func (RooCode) Title() string { return "Roo Code" }
func (RooCode) Path(env Env, scope Scope) (string, error) {
	if scope == ScopeProject {
		return env.join(env.Project, ".roo", "mcp.json"), nil
	}
	return env.join(env.vscodeUserDir(), "globalStorage", "rooveterinaryinc.roo-cline", "settings", "mcp_settings.json"), nil
}
func (RooCode) Add(file []byte, e Entry) ([]byte, error) {
	if err := e.checkURL(); err != nil {
		return nil, err
	}
	return addJSON(file, "mcpServers", e.Name, typedURLEntry{Type: "streamable-http", URL: e.URL})
}
func (RooCode) Remove(file []byte, name string) ([]byte, error) {
	return removeJSON(file, "mcpServers", name)
}

// GeminiCLI reads ~/.gemini/settings.json and a project's .gemini/settings.json,
// with servers under "mcpServers"; a Streamable HTTP one has an "httpUrl" ("url"
// would mean SSE) (google-gemini/gemini-cli docs/tools/mcp-server.md).
type GeminiCLI struct{}

type geminiEntry struct {
	HTTPURL string `json:"httpUrl"`
}

func (GeminiCLI) Name() string  { return "gemini-cli" }
func (GeminiCLI) Title() string { return "Gemini CLI" }
func (GeminiCLI) Path(env Env, scope Scope) (string, error) {
	if scope == ScopeProject {
		return env.join(env.Project, ".gemini", "settings.json"), nil
	}
	return env.join(env.Home, ".gemini", "settings.json"), nil
}
func (GeminiCLI) Add(file []byte, e Entry) ([]byte, error) {
	if err := e.checkURL(); err != nil {
		return nil, err
	}
	return addJSON(file, "mcpServers", e.Name, geminiEntry{HTTPURL: e.URL})
}
func (GeminiCLI) Remove(file []byte, name string) ([]byte, error) {
	return removeJSON(file, "mcpServers", name)
}

// Codex reads $CODEX_HOME/config.toml (~/.codex by default) and, in a trusted
// project, .codex/config.toml; each server is a [mcp_servers.<name>] table, a
// Streamable HTTP one with a "url" (developers.openai.com/codex/mcp).
type Codex struct{}

func (Codex) Name() string  { return "codex" }
func (Codex) Title() string { return "Codex" }
func (Codex) Path(env Env, scope Scope) (string, error) {
	if scope == ScopeProject {
		return env.join(env.Project, ".codex", "config.toml"), nil
	}
	home := env.CodexHome
	if home == "" {
		home = env.join(env.Home, ".codex")
	}
	return env.join(home, "config.toml"), nil
}
func (Codex) Add(file []byte, e Entry) ([]byte, error) {
	if err := e.checkURL(); err != nil {
		return nil, err
	}
	return addTOML(file, "mcp_servers", e.Name, []tomlField{{"url", e.URL}})
}
func (Codex) Remove(file []byte, name string) ([]byte, error) {
	return removeTOML(file, "mcp_servers", name)
}

// Zed reads settings.json in its configuration directory (~/.config/zed on Linux
// and macOS, %APPDATA%\Zed on Windows: crates/paths) and a project's
// .zed/settings.json, with servers under "context_servers"; a remote one has a
// "url" (zed.dev/docs/ai/mcp).
type Zed struct{}

func (Zed) Name() string  { return "zed" }
func (Zed) Title() string { return "Zed" }
func (Zed) Path(env Env, scope Scope) (string, error) {
	if scope == ScopeProject {
		return env.join(env.Project, ".zed", "settings.json"), nil
	}
	switch env.OS {
	case "darwin":
		return env.join(env.Home, ".config", "zed", "settings.json"), nil
	case "windows":
		return env.join(env.appData(), "Zed", "settings.json"), nil
	}
	return env.join(env.configDir(), "zed", "settings.json"), nil
}
func (Zed) Add(file []byte, e Entry) ([]byte, error) {
	if err := e.checkURL(); err != nil {
		return nil, err
	}
	return addJSON(file, "context_servers", e.Name, urlEntry{URL: e.URL})
}
func (Zed) Remove(file []byte, name string) ([]byte, error) {
	return removeJSON(file, "context_servers", name)
}

// Goose reads config.yaml (~/.config/goose, %APPDATA%\Block\goose\config on
// Windows), with servers under "extensions"; a remote one has type
// streamable_http and a "uri" (block/goose documentation/docs/guides/config-files.md).
type Goose struct{}

type gooseEntry struct {
	Enabled     bool   `yaml:"enabled"`
	Type        string `yaml:"type"`
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	URI         string `yaml:"uri"`
	Timeout     int    `yaml:"timeout"`
}

func (Goose) Name() string  { return "goose" }
func (Goose) Title() string { return "goose" }
func (Goose) Path(env Env, scope Scope) (string, error) {
	if scope == ScopeProject {
		return "", ErrNoProjectScope
	}
	if env.OS == "windows" {
		return env.join(env.appData(), "Block", "goose", "config", "config.yaml"), nil
	}
	return env.join(env.configDir(), "goose", "config.yaml"), nil
}
func (Goose) Add(file []byte, e Entry) ([]byte, error) {
	if err := e.checkURL(); err != nil {
		return nil, err
	}
	return addYAML(file, "extensions", e.Name, gooseEntry{
		Enabled:     true,
		Type:        "streamable_http",
		Name:        e.Name,
		Description: e.Description,
		URI:         e.URL,
		Timeout:     300,
	})
}
func (Goose) Remove(file []byte, name string) ([]byte, error) {
	return removeYAML(file, "extensions", name)
}
