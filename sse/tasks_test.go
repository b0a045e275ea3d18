package sse_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestTasksNeedAServerThatDeclaresThem: the methods the tasks extension removed
// (tasks/list, tasks/result) are unknown at 2026-07-28 whatever the tool, and, like
// every request that names something, the extension's methods must name their task
// in Mcp-Name too. (A tool whose server knows nothing of tasks has the gateway's:
// kepttasks_test.go.)
func TestTasksNeedAServerThatDeclaresThem(t *testing.T) {
	e := newEnv(t)
	ed := e.startEdge(t, 0, nil)
	url := e.streamableURL(ed.url)
	withTasks := func(body string) string {
		return strings.Replace(body, `"io.modelcontextprotocol/clientCapabilities":{}`,
			`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`, 1)
	}
	for _, m := range []string{"tasks/list", "tasks/result"} {
		h, body := rev20260728(m, `"taskId":"tgt1.abc.def"`)
		h["Mcp-Name"] = "tgt1.abc.def"
		x := do(t, "POST", url, h, withTasks(body))
		if code, _ := x.rpcError(); x.status != http.StatusNotFound || code != -32601 {
			t.Fatalf("%s: %d %s, want 404 and -32601", m, x.status, x.body)
		}
	}
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		h, body := rev20260728(m, `"taskId":"tgt1.abc.def"`)
		h["Mcp-Name"] = "tgt1.abc.def"
		x := do(t, "POST", url, h, withTasks(body))
		if code, _ := x.rpcError(); x.status != http.StatusBadRequest || code != -32602 {
			t.Fatalf("%s of an unknown task: %d %s, want 400 and -32602", m, x.status, x.body)
		}
		h, body = rev20260728(m, `"taskId":"tgt1.abc.def"`)
		h["Mcp-Name"] = "tgt1.abc.def"
		x = do(t, "POST", url, h, body)
		if code, _ := x.rpcError(); x.status != http.StatusBadRequest || code != -32021 {
			t.Fatalf("%s of a client without the extension: %d %s, want 400 and -32021", m, x.status, x.body)
		}
		h, body = rev20260728(m, `"taskId":"tgt1.abc.def"`)
		x = do(t, "POST", url, h, withTasks(body))
		if code, _ := x.rpcError(); x.status != http.StatusBadRequest || code != -32020 {
			t.Fatalf("%s without Mcp-Name: %d %s, want 400 and -32020", m, x.status, x.body)
		}
	}
}
