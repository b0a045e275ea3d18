package sse_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// inspectorCLI is the MCP Inspector's command-line client, from npm.
const inspectorCLI, inspectorCLIVersion = "@modelcontextprotocol/inspector-cli", "1.0.3"

// TestInspectorCLIUsesALink runs the MCP Inspector's CLI against a link, once per
// command as people run it: over Streamable HTTP, over legacy SSE, and with `toolgate
// connect` as its stdio server; it lists the tools and calls one.
func TestInspectorCLIUsesALink(t *testing.T) {
	dir := testenv.NPMPackage(t, inspectorCLI, inspectorCLIVersion)
	cli := filepath.Join(dir, "node_modules", filepath.FromSlash(inspectorCLI), "build", "index.js")
	e := newEnv(t)
	ed := e.startEdge(t, 0, nil)
	bin := toolgate(t)
	targets := map[string][]string{
		"over Streamable HTTP":     {e.streamableURL(ed.url), "--transport", "http"},
		"over legacy SSE":          {e.sseURL(ed.url), "--transport", "sse"},
		"through toolgate connect": {bin, "connect", e.streamableURL(ed.url)},
	}
	for name, target := range targets {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each run is a Node process start: run the targets side by side
			run := func(args ...string) string {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, "node", append(append([]string{cli}, target...), args...)...)
				// It finds its package.json from the working folder.
				cmd.Dir = filepath.Dir(cli)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("inspector %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				return string(out)
			}
			if out := run("--method", "tools/list"); !strings.Contains(out, `"name": "echo"`) || !strings.Contains(out, `"name": "count"`) {
				t.Fatalf("tools/list printed %s", out)
			}
			if out := run("--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=hello"); !strings.Contains(out, `{\"text\":\"hello\"}`) {
				t.Fatalf("tools/call echo printed %s", out)
			}
		})
	}
}
