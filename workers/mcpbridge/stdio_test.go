package mcpbridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/mcpfixture"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers/mcpbridge"
)

func TestStdioServer(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	e.start(stdioConfig("fixture", 2))
	t.Logf("the bridge served the stdio fixture %v after its start", time.Since(start).Round(time.Millisecond))
	ctx := testenv.Context(t)

	t.Run("the server's tools are the tool's methods, with their schemas", func(t *testing.T) {
		entry := e.view.Snapshot().RawTool("fixture")
		tool := entry.Tool
		if tool.Title != "MCP fixture" || tool.Version != "1.0.0" || !strings.HasPrefix(tool.Description, "A server for tests") {
			t.Errorf("tool: title %q, version %q, description %q", tool.Title, tool.Version, tool.Description)
		}
		if c := tool.Capabilities; !c.Resources || !c.Prompts || !c.Completions || !c.Logging {
			t.Errorf("capabilities %+v, want resources, prompts, completions and logging", c)
		}
		echo := entry.Method("echo")
		if echo == nil {
			t.Fatal("no method echo")
		}
		m := echo.Method
		if m.Title != "Echo" || m.Description != "Says the text back, with its length" || !strings.Contains(string(m.Annotations), `"readOnlyHint":true`) {
			t.Errorf("echo: title %q, description %q, annotations %s", m.Title, m.Description, m.Annotations)
		}
		if !strings.Contains(string(m.InputSchema), `"text"`) || !strings.Contains(string(m.OutputSchema), `"length"`) {
			t.Errorf("echo schemas: in %s, out %s", m.InputSchema, m.OutputSchema)
		}
		pid := entry.Method("process_pid")
		if pid == nil || pid.Method.MCPName != mcpfixture.DottedToolName {
			t.Fatalf("the dotted tool: %+v", pid)
		}
		schema := entry.Method(mcpfixture.SchemaToolName).Method.InputSchema
		for _, k := range []string{`"$schema":"https://json-schema.org/draft/2020-12/schema"`, `"$defs":{"address"`, `"additionalProperties":false`} {
			if !strings.Contains(string(schema), k) {
				t.Errorf("2020-12 schema %s lost %s", schema, k)
			}
		}
		for _, name := range []string{"test_simple_text", "test_sampling", "sleep", "crash", "toggle_extra"} {
			if entry.Method(name) == nil {
				t.Errorf("no method %s", name)
			}
		}
		if entry.Method(mcpfixture.ExtraToolName) != nil {
			t.Error("the extra tool is there before it was added")
		}
	})

	t.Run("a tool whose schema the gateway cannot compile is kept, unchecked", func(t *testing.T) {
		m := e.view.Snapshot().RawTool("fixture").Method(mcpfixture.RemoteSchemaToolName)
		if m == nil || len(m.Method.InputSchema) != 0 {
			t.Fatalf("method %+v, want it without an input schema", m)
		}
		if !e.logs.has("input schema does not compile", "mcp_tool="+mcpfixture.RemoteSchemaToolName) {
			t.Error("no warning in the log")
		}
		res := e.result(t, ctx, "fixture", call{method: mcpfixture.RemoteSchemaToolName, params: `{"thing":1}`})
		if got := texts(res); len(got) != 1 || got[0] != `Received: {"thing":1}` {
			t.Errorf("texts %q", got)
		}
	})

	t.Run("a call answers with the server's CallToolResult", func(t *testing.T) {
		res := e.result(t, ctx, "fixture", call{method: "test_simple_text", params: `{}`})
		if got := texts(res); len(got) != 1 || got[0] != mcpfixture.SimpleText {
			t.Errorf("texts %q", got)
		}
		res = e.result(t, ctx, "fixture", call{method: "test_multiple_content_types", params: `{}`})
		if content := res["content"].([]any); len(content) != 3 || content[2].(map[string]any)["type"] != "resource" {
			t.Errorf("content %v", content)
		}
	})

	t.Run("structured results come back as the server gave them", func(t *testing.T) {
		res := e.result(t, ctx, "fixture", call{method: "echo", params: `{"text":"hello"}`})
		if sc, _ := json.Marshal(res["structuredContent"]); string(sc) != `{"length":5,"text":"hello"}` {
			t.Errorf("structuredContent %s", sc)
		}
		res = e.result(t, ctx, "fixture", call{method: "process_pid", params: `{}`})
		if pid, _ := res["structuredContent"].(map[string]any)["pid"].(float64); pid <= 0 {
			t.Errorf("the dotted tool answered %v", res)
		}
	})

	t.Run("a tool's error is an isError result, not a failed call", func(t *testing.T) {
		res := e.result(t, ctx, "fixture", call{method: "test_error_handling", params: `{}`})
		if res["isError"] != true || texts(res)[0] != mcpfixture.ErrorText {
			t.Errorf("result %v", res)
		}
	})

	t.Run("the gateway checks parameters against the server's schema", func(t *testing.T) {
		_, err := e.do(ctx, "fixture", call{method: "echo", params: `{"text":5}`})
		var ve *registry.ValidationError
		if !errors.As(err, &ve) || ve.Violations[0].Pointer != "/text" {
			t.Fatalf("got %v, want a validation error at /text", err)
		}
	})

	t.Run("progress notifications reach a caller that asks", func(t *testing.T) {
		id := "req-progress"
		notes := e.notes(t, "fixture", id)
		e.result(t, ctx, "fixture", call{method: "test_tool_with_progress", params: `{}`, progress: true, requestID: id})
		var got []string
		for _, n := range notes() {
			got = append(got, fmt.Sprintf("%s %v/%v", n.Kind, n.Progress, n.Total))
		}
		if strings.Join(got, ", ") != "progress 0/100, progress 50/100, progress 100/100" {
			t.Errorf("notifications: %v", got)
		}
	})

	t.Run("log messages reach a caller that asks", func(t *testing.T) {
		id := "req-logging"
		notes := e.notes(t, "fixture", id)
		e.result(t, ctx, "fixture", call{method: "test_tool_with_logging", params: `{}`, progress: true, requestID: id})
		var got []string
		for _, n := range notes() {
			got = append(got, fmt.Sprintf("%s %s %s %s", n.Kind, n.Level, n.Logger, n.Data))
		}
		want := `log info mcpfixture "Tool execution started", log info mcpfixture "Tool processing data", log info mcpfixture "Tool execution completed"`
		if strings.Join(got, ", ") != want {
			t.Errorf("notifications: %v", got)
		}
	})

	t.Run("a cancelled call is cancelled on the server", func(t *testing.T) {
		id := "req-cancel"
		sub, err := e.nc.SubscribeSync(wire.DefaultSubjects.Progress("fixture", id))
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			_, err := e.do(cctx, "fixture", call{method: "sleep", params: `{}`, progress: true, requestID: id})
			errc <- err
		}()
		if _, err := sub.NextMsg(testenv.Patience); err != nil {
			t.Fatalf("the sleep did not start: %v", err)
		}
		cancelled := time.Now()
		cancel() // bus.Do publishes tg.cancel.fixture.<id>; the bridge's CallTool context ends
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("the call returned %v, want context.Canceled", err)
		}
		// The child says so on stderr, which the bridge logs line by line.
		_, seen := e.logs.wait(t, 5*time.Second, "upstream stderr", "mcpfixture: call of sleep cancelled")
		t.Logf("the server saw the cancellation %v after the caller cancelled", seen.Sub(cancelled).Round(time.Millisecond))
	})

	t.Run("a resource read and a prompt get go to the server on tg.mcp", func(t *testing.T) {
		for _, tt := range []struct{ method, params, want string }{
			{"resources/read", `{"uri":"test://static-text"}`, `"text":"` + mcpfixture.StaticText + `"`},
			{"resources/read", `{"uri":"test://template/123/data"}`, `Data for ID: 123`},
			{"resources/list", `{}`, `"uri":"test://static-binary"`},
			{"resources/templates/list", `{}`, `"uriTemplate":"test://template/{id}/data"`},
			{"prompts/get", `{"name":"test_prompt_with_arguments","arguments":{"arg1":"hello","arg2":"world"}}`, `Prompt with arguments: arg1='hello', arg2='world'`},
			{"prompts/list", `{}`, `"name":"test_prompt_with_image"`},
			{"completion/complete", `{"ref":{"type":"ref/prompt","name":"test_prompt_with_arguments"},"argument":{"name":"arg1","value":"par"}}`, `"values":["paris","park","party"]`},
		} {
			r, err := e.askMCP(ctx, "fixture", tt.method, tt.params, "")
			if err != nil {
				t.Fatalf("%s: %v", tt.method, err)
			}
			if !strings.Contains(string(r.Data), tt.want) {
				t.Errorf("%s: %s lacks %s", tt.method, r.Data, tt.want)
			}
		}
	})

	t.Run("MCP errors come back as JSON-RPC errors", func(t *testing.T) {
		for _, tt := range []struct {
			method, params string
			code           int64
			message, data  string
		}{
			// The server's own error, as it gave it (the SDK follows SEP-2164: -32602).
			{"resources/read", `{"uri":"test://nowhere"}`, -32602, "Resource not found", `{"uri":"test://nowhere"}`},
			{"tools/list", `{}`, -32601, "method not found: tools/list", ""},
			{"prompts/get", `{"name":7}`, -32602, "", ""},
		} {
			_, err := e.askMCP(ctx, "fixture", tt.method, tt.params, "")
			var re *wire.RPCError
			if !errors.As(err, &re) || re.Code != tt.code || (tt.message != "" && re.Message != tt.message) || string(re.Data) != tt.data {
				t.Errorf("%s %s: got %v, want JSON-RPC error %d %q %s", tt.method, tt.params, err, tt.code, tt.message, tt.data)
			}
		}
	})

	t.Run("the server's elicitation reaches the caller's MCP session", func(t *testing.T) {
		session := "sess-elicit"
		edge := testenv.NewSessionEdge(t, e.nc, "fixture", session, answerWith(`{"action":"accept","content":{"username":"ada","email":"ada@example.com"}}`))
		res := e.result(t, ctx, "fixture", call{method: "test_elicitation", params: `{"message":"Who are you?"}`, session: session})
		want := `User response: action=accept, content={"email":"ada@example.com","username":"ada"}`
		if got := texts(res); len(got) != 1 || got[0] != want {
			t.Errorf("texts %q, want %q", got, want)
		}
		req := <-edge.Sent
		if req["method"] != "elicitation/create" || req["params"].(map[string]any)["message"] != "Who are you?" {
			t.Errorf("the session got %v", req)
		}
	})

	t.Run("so does sampling", func(t *testing.T) {
		session := "sess-sample"
		testenv.NewSessionEdge(t, e.nc, "fixture", session, answerWith(`{"role":"assistant","model":"m","content":{"type":"text","text":"4"}}`))
		res := e.result(t, ctx, "fixture", call{method: "test_sampling", params: `{"prompt":"2+2?"}`, session: session})
		if got := texts(res); len(got) != 1 || got[0] != "LLM response: 4" {
			t.Errorf("texts %q", got)
		}
	})

	t.Run("a session whose client cannot elicit is not asked", func(t *testing.T) {
		session := "sess-no-elicitation"
		edge := testenv.NewSessionEdge(t, e.nc, "fixture", session, answerWith(`{"action":"accept","content":{}}`))
		_, err := e.do(ctx, "fixture", call{method: "test_elicitation", params: `{"message":"Who?"}`, session: session, caps: []string{"sampling"}})
		te := serverError(t, err)
		if !strings.Contains(te.Message, "does not support elicitation") {
			t.Errorf("message %q", te.Message)
		}
		select {
		case m := <-edge.Sent:
			t.Errorf("the session was sent %v", m)
		default:
		}
	})

	t.Run("a call without an MCP session cannot be asked, and says so", func(t *testing.T) {
		_, err := e.do(ctx, "fixture", call{method: "test_sampling", params: `{"prompt":"2+2?"}`})
		te := serverError(t, err)
		if !strings.Contains(te.Message, "no client to ask") {
			t.Errorf("message %q", te.Message)
		}
	})

	t.Run("a server's new tool becomes a method", func(t *testing.T) {
		res := e.result(t, ctx, "fixture", call{method: "toggle_extra", params: `{}`})
		if texts(res)[0] != "extra added" {
			t.Fatalf("toggle: %v", res)
		}
		changed := time.Now()
		testenv.WaitFor(t, "the record has the extra method", func() bool {
			return e.view.Snapshot().RawTool("fixture").Method(mcpfixture.ExtraToolName) != nil
		})
		t.Logf("the record gained the method %v after the server added the tool", time.Since(changed).Round(time.Millisecond))
		// Only the child that ran the toggle has the tool; calls find it there.
		for range 3 {
			res := e.result(t, ctx, "fixture", call{method: mcpfixture.ExtraToolName, params: `{}`})
			if texts(res)[0] != "extra here" {
				t.Fatalf("extra: %v", res)
			}
		}
	})
}

func TestChildCrashMidCall(t *testing.T) {
	e := newEnv(t)
	e.start(stdioConfig("crashy", 2))
	ctx := testenv.Context(t)

	// A long call holds one child (it says so as it starts); the crash goes to the
	// other, the least busy.
	sleeping, err := e.nc.SubscribeSync(wire.DefaultSubjects.Progress("crashy", "req-sleep"))
	if err != nil {
		t.Fatal(err)
	}
	defer sleeping.Unsubscribe()
	var wg sync.WaitGroup
	var sleepErr error
	wg.Go(func() {
		_, sleepErr = e.do(ctx, "crashy", call{method: "sleep", params: `{"ms":3000}`, progress: true, requestID: "req-sleep"})
	})
	if _, err := sleeping.NextMsg(testenv.Patience); err != nil {
		t.Fatalf("the long call did not start: %v", err)
	}

	id := "req-crash"
	sub, err := e.nc.SubscribeSync(wire.DefaultSubjects.Progress("crashy", id))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	errc := make(chan error, 1)
	go func() {
		_, err := e.do(ctx, "crashy", call{method: "crash", params: `{"after_ms":100}`, progress: true, requestID: id})
		errc <- err
	}()
	if _, err := sub.NextMsg(testenv.Patience); err != nil {
		t.Fatalf("no word from the crash tool: %v", err)
	}
	exited := time.Now() // the child exits right after telling so
	mark := e.logs.mark()
	select {
	case err := <-errc:
		latency := time.Since(exited)
		te := toolError(t, err, mcpbridge.CodeUnavailable, 503)
		t.Logf("the call failed %v after its child exited: %s", latency.Round(time.Millisecond), te.Message)
		if latency > time.Second {
			t.Logf("the call failed %v after the crash, more than the 1s promised", latency.Round(time.Millisecond))
		}
	case <-time.After(testenv.Patience):
		t.Fatalf("the call on the crashed child did not fail within %v", testenv.Patience)
	}

	t.Run("the call on the other child goes on", func(t *testing.T) {
		wg.Wait()
		if sleepErr != nil {
			t.Fatalf("the call on the other child failed: %v", sleepErr)
		}
	})
	t.Run("the child is restarted and the next call succeeds", func(t *testing.T) {
		_, restarted := e.logs.waitFrom(t, mark, 10*time.Second, "upstream session started")
		t.Logf("the child was restarted %v after it exited", restarted.Sub(exited).Round(time.Millisecond))
		pids := map[float64]bool{}
		for range 4 {
			res := e.result(t, ctx, "crashy", call{method: "process_pid", params: `{}`})
			pids[res["structuredContent"].(map[string]any)["pid"].(float64)] = true
		}
		if len(pids) != 2 {
			t.Errorf("4 calls reached %d processes, want both children", len(pids))
		}
	})
	t.Run("the child's exit is in the worker's log", func(t *testing.T) {
		if !e.logs.has("upstream session ended", "exit status 3") {
			t.Error("no log line of the session's end with its exit status")
		}
	})
}

// answerWith answers every request with a JSON-RPC result of result.
func answerWith(result string) func(id string) string {
	return func(id string) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":%s}`, id, result) }
}

// TestClientSessionsEnd checks that the upstream session a client session holds ends
// once the client's session has been idle for ClientSessionIdle, and when the edges
// announce the session's end, and that a session at ClientSessions is refused.
func TestClientSessionsEnd(t *testing.T) {
	e := newEnv(t)
	cfg := stdioConfig("ends", 1)
	cfg.ClientSessions, cfg.ClientSessionIdle = 1, 2*time.Second
	b := e.start(cfg)
	ctx := testenv.Context(t)

	held := func(id string) bool { return slices.Contains(b.ClientSessions(), id) }
	e.result(t, ctx, "ends", call{method: "echo", params: `{"text":"a"}`, session: "sess-idle"})
	if !held("sess-idle") {
		t.Fatalf("sessions held %v, want sess-idle", b.ClientSessions())
	}
	_, err := e.do(ctx, "ends", call{method: "echo", params: `{"text":"b"}`, session: "sess-other"})
	toolError(t, err, mcpbridge.CodeSessionLimit, 503)
	testenv.WaitFor(t, "the idle session's upstream session ended", func() bool { return !held("sess-idle") })

	e.result(t, ctx, "ends", call{method: "echo", params: `{"text":"c"}`, session: "sess-other"})
	if err := e.nc.Publish(wire.DefaultSubjects.SessionEnd("ends", "sess-other"), nil); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the ended session's upstream session ended", func() bool { return !held("sess-other") })
}
