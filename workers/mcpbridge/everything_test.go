package mcpbridge_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// everything is the MCP project's reference server, from npm.
const everything = "@modelcontextprotocol/server-everything"

// TestReferenceServerFromNPM deploys the reference server the way a user would:
// toolgate worker mcp --tool everything -- npx -y @modelcontextprotocol/server-everything.
func TestReferenceServerFromNPM(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches a server from npm")
	}
	npx := testenv.NPXPackage(t, everything)

	e := newEnv(t)
	cfg := stdioConfig("everything", 2)
	cfg.Command = []string{npx, "-y", everything}
	cfg.StartTimeout = time.Minute
	start := time.Now()
	e.start(cfg)
	t.Logf("the bridge served the reference server %v after its start", time.Since(start).Round(time.Millisecond))
	tctx := testenv.Context(t)

	t.Run("its tools are methods, draft-07 schemas and all", func(t *testing.T) {
		entry := e.view.Snapshot().RawTool("everything")
		var names []string
		for _, m := range entry.Tool.Methods {
			names = append(names, m.Name)
		}
		t.Logf("%d methods: %s", len(names), strings.Join(names, ", "))
		for _, want := range []string{"echo", "get-sum", "get-structured-content"} {
			if entry.Method(want) == nil {
				t.Errorf("no method %s", want)
			}
		}
		if m := entry.Method("echo"); m != nil && !strings.Contains(string(m.Method.InputSchema), "draft-07") {
			t.Errorf("echo's schema %s", m.Method.InputSchema)
		}
		if c := entry.Tool.Capabilities; !c.Resources || !c.Prompts {
			t.Errorf("capabilities %+v", c)
		}
	})
	t.Run("calls answer as the server does", func(t *testing.T) {
		res := e.result(t, tctx, "everything", call{method: "echo", params: `{"message":"hello"}`})
		if got := texts(res); len(got) != 1 || !strings.Contains(got[0], "hello") {
			t.Errorf("echo: %v", res)
		}
		res = e.result(t, tctx, "everything", call{method: "get-sum", params: `{"a":2,"b":3}`})
		if got := texts(res); len(got) != 1 || !strings.Contains(got[0], "5") {
			t.Errorf("get-sum: %v", res)
		}
		res = e.result(t, tctx, "everything", call{method: "get-structured-content", params: `{"location":"Chicago"}`})
		if res["structuredContent"] == nil {
			t.Errorf("get-structured-content: %v", res)
		}
	})
	t.Run("a long operation reports progress", func(t *testing.T) {
		id := "req-everything-progress"
		notes := e.notes(t, "everything", id)
		e.result(t, tctx, "everything", call{method: "trigger-long-running-operation", params: `{"duration":1,"steps":2}`, progress: true, requestID: id})
		if n := notes(); len(n) < 2 {
			t.Errorf("%d progress notifications, want 2", len(n))
		}
	})
	t.Run("its resources and prompts are served on tg.mcp", func(t *testing.T) {
		r, err := e.askMCP(tctx, "everything", "resources/list", `{}`, "")
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Resources []struct {
				URI string `json:"uri"`
			} `json:"resources"`
		}
		if err := json.Unmarshal(r.Data, &list); err != nil || len(list.Resources) == 0 {
			t.Fatalf("resources/list: %v %s", err, r.Data)
		}
		uri := list.Resources[0].URI
		read, err := e.askMCP(tctx, "everything", "resources/read", `{"uri":"`+uri+`"}`, "")
		if err != nil || !strings.Contains(string(read.Data), `"contents"`) {
			t.Errorf("resources/read %s: %v %s", uri, err, data(read))
		}
		prompts, err := e.askMCP(tctx, "everything", "prompts/list", `{}`, "")
		if err != nil || !strings.Contains(string(prompts.Data), `"prompts"`) {
			t.Errorf("prompts/list: %v %s", err, data(prompts))
		}
	})
}
