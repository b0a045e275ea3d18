package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

const (
	testKey  = "tg_4fYq9kTestKey"
	linkPath = "/mcp/lnk_Zq81secret"
)

// fakeEdge stands in for the gateway's edge: GET /tools/{tool} with its record
// and its error envelope.
func fakeEdge(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	var base string
	mux.HandleFunc("GET /tools/{tool}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fail := func(status int, code, msg string) {
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "request_id": "req_42"}})
		}
		if r.Header.Get("SERVICE_API_KEY") != testKey {
			fail(http.StatusUnauthorized, "unauthenticated", "missing or unknown API key")
			return
		}
		if r.PathValue("tool") != "email" {
			fail(http.StatusNotFound, "tool_not_found", "tool \""+r.PathValue("tool")+"\" is not available to this account")
			return
		}
		json.NewEncoder(w).Encode(map[string]any{
			"id": "email", "title": "Email", "description": "Send and read email.",
			"status": "online", "instances": 1,
			"sse_url": base + linkPath + "/sse", "mcp_url": base + linkPath, "api_url": base + "/tools/email",
			"methods": []any{map[string]any{"name": "send_email", "description": "Send an email", "input_schema": map[string]any{"type": "object"}}},
		})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	base = srv.URL
	return srv.URL
}

// home gives the test a fresh home and project directory, the working directory.
func home(t *testing.T) (homeDir, project string) {
	t.Helper()
	homeDir = t.TempDir()
	project = filepath.Join(homeDir, "src", "shop")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", homeDir)
	t.Setenv("USERPROFILE", homeDir)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(homeDir, ".config"))
	t.Setenv("APPDATA", filepath.Join(homeDir, "AppData", "Roaming"))
	t.Setenv("CODEX_HOME", "")
	t.Setenv("TOOLGATE_BASE_URL", "")
	t.Chdir(project)
	return homeDir, project
}

// toolgate runs the command line in process and returns what it printed.
func toolgate(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

func field(v map[string]any, keys ...string) any {
	var cur any = v
	for _, k := range keys {
		m, _ := cur.(map[string]any)
		cur = m[k]
	}
	return cur
}

func TestInstallWritesTheToolIntoTheClient(t *testing.T) {
	edge := fakeEdge(t)

	t.Run("cursor gets the tool's link and the user is told which file changed", func(t *testing.T) {
		homeDir, _ := home(t)
		out, err := toolgate(t, "install", "email", testKey, "--client", "Cursor", "--base-url", edge)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		path := filepath.Join(homeDir, ".cursor", "mcp.json")
		if got := field(readJSON(t, path), "mcpServers", "email", "url"); got != edge+linkPath {
			t.Errorf("mcpServers.email.url = %v", got)
		}
		if !strings.Contains(out, path) || !strings.Contains(out, "Cursor") {
			t.Errorf("output does not say what was written where:\n%s", out)
		}
		if strings.Contains(out, linkPath) || strings.Contains(out, testKey) {
			t.Errorf("output shows the link or the key:\n%s", out)
		}

		again, err := toolgate(t, "install", "email", testKey, "--client", "cursor", "--base-url", edge)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(again, "already installed") {
			t.Errorf("second install says:\n%s", again)
		}
		if _, err := os.Stat(path + ".bak"); !os.IsNotExist(err) {
			t.Error("a backup appeared though nothing changed")
		}
	})

	t.Run("the base URL comes from TOOLGATE_BASE_URL when no flag gives it", func(t *testing.T) {
		homeDir, _ := home(t)
		t.Setenv("TOOLGATE_BASE_URL", edge)
		if out, err := toolgate(t, "install", "email", testKey, "--client", "gemini", "--name", "mail"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if got := field(readJSON(t, filepath.Join(homeDir, ".gemini", "settings.json")), "mcpServers", "mail", "httpUrl"); got != edge+linkPath {
			t.Errorf("mcpServers.mail.httpUrl = %v", got)
		}
	})

	t.Run("claude desktop, which runs only stdio servers, gets toolgate connect", func(t *testing.T) {
		homeDir, _ := home(t)
		if out, err := toolgate(t, "install", "email", testKey, "--client", "claude", "--base-url", edge); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		path := filepath.Join(homeDir, ".config", "Claude", "claude_desktop_config.json")
		switch runtime.GOOS {
		case "darwin":
			path = filepath.Join(homeDir, "Library", "Application Support", "Claude", "claude_desktop_config.json")
		case "windows":
			path = filepath.Join(homeDir, "AppData", "Roaming", "Claude", "claude_desktop_config.json")
		}
		entry := readJSON(t, path)
		exe, _ := os.Executable()
		if got := field(entry, "mcpServers", "email", "command"); got != exe {
			t.Errorf("command = %v, want this binary %s", got, exe)
		}
		args, _ := field(entry, "mcpServers", "email", "args").([]any)
		if len(args) != 2 || args[0] != "connect" || args[1] != edge+linkPath {
			t.Errorf("args = %v", args)
		}
	})

	t.Run("project scope writes the project's file", func(t *testing.T) {
		_, project := home(t)
		if out, err := toolgate(t, "install", "email", testKey, "--client", "vscode", "--scope", "project", "--base-url", edge); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		v := readJSON(t, filepath.Join(project, ".vscode", "mcp.json"))
		if field(v, "servers", "email", "type") != "http" || field(v, "servers", "email", "url") != edge+linkPath {
			t.Errorf("servers.email = %v", field(v, "servers", "email"))
		}
	})

	t.Run("a dry run prints the file it would write and writes nothing", func(t *testing.T) {
		homeDir, _ := home(t)
		out, err := toolgate(t, "install", "email", testKey, "--client", "codex", "--base-url", edge, "--dry-run")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		path := filepath.Join(homeDir, ".codex", "config.toml")
		if !strings.Contains(out, "Would write "+path) || !strings.Contains(out, "[mcp_servers.email]") {
			t.Errorf("dry run printed:\n%s", out)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("dry run wrote %s", path)
		}
	})
}

func TestInstallExplainsWhatWentWrong(t *testing.T) {
	edge := fakeEdge(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String()
	l.Close()

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"an unknown tool shows the gateway's message and code", []string{"install", "calendar", testKey, "--client", "cursor", "--base-url", edge}, []string{`tool "calendar" is not available`, "tool_not_found", "404", "req_42"}},
		{"a wrong key shows unauthenticated", []string{"install", "email", "tg_wrong", "--client", "cursor", "--base-url", edge}, []string{"unauthenticated", "401"}},
		{"a gateway that is down is named", []string{"install", "email", testKey, "--client", "cursor", "--base-url", down}, []string{"cannot reach the gateway at " + down}},
		{"an unknown client lists the known ones", []string{"install", "email", testKey, "--client", "notepad", "--base-url", edge}, []string{"notepad", "claude-desktop"}},
		{"a client without project scope says so", []string{"install", "email", testKey, "--client", "windsurf", "--scope", "project", "--base-url", edge}, []string{"windsurf", "no project configuration"}},
		{"a bad tool id names the argument", []string{"install", "Email!", testKey, "--client", "cursor", "--base-url", edge}, []string{"tool-id"}},
		{"a bad base URL names the flag", []string{"install", "email", testKey, "--client", "cursor", "--base-url", "localhost:8080"}, []string{"base-url"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			homeDir, _ := home(t)
			out, err := toolgate(t, tc.args...)
			if err == nil {
				t.Fatalf("install succeeded:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error shows the key: %v", err)
			}
			if _, err := os.Stat(filepath.Join(homeDir, ".cursor")); !os.IsNotExist(err) {
				t.Error("a failed install wrote a configuration")
			}
		})
	}

	t.Run("a malformed configuration is named and left untouched", func(t *testing.T) {
		homeDir, _ := home(t)
		path := filepath.Join(homeDir, ".codex", "config.toml")
		bad := []byte("model = \"gpt-5\"\n[mcp_servers.github\n")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := toolgate(t, "install", "email", testKey, "--client", "codex", "--base-url", edge)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not valid TOML") {
			t.Fatalf("error %v does not name the malformed file", err)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, bad) {
			t.Error("the malformed file was changed")
		}
	})
}

func TestUninstallTakesTheToolOut(t *testing.T) {
	edge := fakeEdge(t)
	homeDir, _ := home(t)
	path := filepath.Join(homeDir, ".codex", "config.toml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("model = \"gpt-5-codex\"\n\n[mcp_servers.docs]\nurl = \"https://docs.example.com/mcp\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := toolgate(t, "install", "email", testKey, "--client", "codex", "--base-url", edge); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}

	t.Run("the entry goes and the other server stays", func(t *testing.T) {
		out, err := toolgate(t, "uninstall", "email", "--client", "codex")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var doc struct {
			Servers map[string]any `toml:"mcp_servers"`
		}
		b, _ := os.ReadFile(path)
		if err := toml.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		if _, ok := doc.Servers["email"]; ok {
			t.Error("email is still configured")
		}
		if _, ok := doc.Servers["docs"]; !ok {
			t.Error("the other server was removed")
		}
		if !strings.Contains(out, path) {
			t.Errorf("output does not name the file:\n%s", out)
		}
	})

	t.Run("uninstalling again says there is nothing to remove", func(t *testing.T) {
		out, err := toolgate(t, "uninstall", "email", "--client", "codex")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "nothing changed") {
			t.Errorf("second uninstall says:\n%s", out)
		}
	})
}

func TestListClientsShowsWhereEachConfigurationIs(t *testing.T) {
	homeDir, _ := home(t)
	out, err := toolgate(t, "install", "--list-clients")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cursor", "claude-desktop", "vscode", "codex", "goose", filepath.Join(homeDir, ".cursor", "mcp.json")} {
		if !strings.Contains(out, want) {
			t.Errorf("list does not show %q:\n%s", want, out)
		}
	}
}
