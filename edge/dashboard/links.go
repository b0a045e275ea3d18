package dashboard

import (
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/install"
)

// apiKeyPlaceholder stands where a command or example needs the account's API key:
// the dashboard never holds a key after the response that created it.
const apiKeyPlaceholder = "<API_KEY>"

// installCommand is the command that adds tool to client, as `toolgate install` takes it.
func (c Config) installCommand(tool, key string, client install.Client) string {
	return strings.Join([]string{"toolgate", "install", tool, key, "--client", client.Name(),
		"--base-url", shellQuote(c.base())}, " ")
}

// curlExample is a curl command that calls method of tool with params.
func (c Config) curlExample(tool, method, params string) string {
	return fmt.Sprintf("curl -X POST %s \\\n  -H 'SERVICE_API_KEY: %s' \\\n  -H 'Content-Type: application/json' \\\n  -d %s",
		shellQuote(edge.ToolCallURL(c.base(), tool, method)), apiKeyPlaceholder, shellQuote(params))
}

// shellQuote quotes s for a POSIX shell when it holds anything but plain URL characters.
func shellQuote(s string) string {
	plain := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._~:/@%+=,-", r))
	}) < 0
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// clientConfig is one client's configuration holding one tool, as the installer
// would write it into an empty file.
type clientConfig struct {
	Client install.Client
	JSON   string
	Paths  []configPath // where the client reads it
}

type configPath struct {
	OS   string
	Path string
}

// configClients are the clients whose configuration the SSE tab shows.
var configClients = []install.Client{install.Cursor, install.VSCode, install.ClaudeCode, install.ClaudeDesktop}

// clientConfigs builds each client's entry for tool with the installer's own
// builders, so that what is copied from the page and what `toolgate install` writes
// are the same.
func clientConfigs(tool, description, link string) ([]clientConfig, error) {
	entry := install.Entry{
		Name:        tool,
		URL:         link,
		Description: description,
		Command:     "toolgate",
		Args:        []string{"connect", link},
	}
	envs := []struct {
		label string
		env   install.Env
	}{
		{"Linux", install.Env{OS: "linux", Home: "~"}},
		{"macOS", install.Env{OS: "darwin", Home: "~"}},
		{"Windows", install.Env{OS: "windows", Home: "%USERPROFILE%", AppData: "%APPDATA%"}},
	}
	out := make([]clientConfig, 0, len(configClients))
	for _, c := range configClients {
		b, err := c.Add(nil, entry)
		if err != nil {
			return nil, fmt.Errorf("dashboard: %s configuration: %w", c.Name(), err)
		}
		cc := clientConfig{Client: c, JSON: string(b)}
		for _, e := range envs {
			if p, err := c.Path(e.env, install.ScopeUser); err == nil {
				cc.Paths = append(cc.Paths, configPath{OS: e.label, Path: p})
			}
		}
		out = append(out, cc)
	}
	return out, nil
}
