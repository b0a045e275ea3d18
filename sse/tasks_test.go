package sse_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestTasksNeedAServerThatDeclaresThem: a link declares the tasks extension
// (io.modelcontextprotocol/tasks) only for a bridged server that declares it; for any
// other tool its methods are unknown at 2026-07-28, and, like every request that
// names something, they must name their task in Mcp-Name too.
func TestTasksNeedAServerThatDeclaresThem(t *testing.T) {
	e := newEnv(t)
	ed := e.startEdge(t, 0, nil)
	url := e.streamableURL(ed.url)
	withTasks := func(body string) string {
		return strings.Replace(body, `"io.modelcontextprotocol/clientCapabilities":{}`,
			`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`, 1)
	}

	h, body := rev20260728("server/discover", "")
	if x := do(t, "POST", url, h, withTasks(body)); x.status != http.StatusOK || strings.Contains(string(x.body), "extensions") {
		t.Fatalf("server/discover: %d %s", x.status, x.body)
	}
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel", "tasks/list", "tasks/result"} {
		h, body := rev20260728(m, `"taskId":"tgt1.abc.def"`)
		h["Mcp-Name"] = "tgt1.abc.def"
		x := do(t, "POST", url, h, withTasks(body))
		if code, _ := x.rpcError(); x.status != http.StatusNotFound || code != -32601 {
			t.Fatalf("%s: %d %s, want 404 and -32601", m, x.status, x.body)
		}
	}
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		h, body := rev20260728(m, `"taskId":"tgt1.abc.def"`)
		x := do(t, "POST", url, h, withTasks(body))
		if code, _ := x.rpcError(); x.status != http.StatusBadRequest || code != -32020 {
			t.Fatalf("%s without Mcp-Name: %d %s, want 400 and -32020", m, x.status, x.body)
		}
	}
}
