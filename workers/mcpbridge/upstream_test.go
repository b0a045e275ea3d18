package mcpbridge_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestUpstreamMessagesPerCall counts what the server reads on its stdin while the
// bridge serves the calls of a session: one tools/call per call, with the caller's arguments and
// nothing else (no _meta, no progress token nobody asked for, no pings, no
// notifications), as a plain proxy would send; and a progress token only for a caller
// that follows the call's progress.
func TestUpstreamMessagesPerCall(t *testing.T) {
	e := newEnv(t)
	seen := filepath.Join(t.TempDir(), "stdin")
	cfg := stdioConfig("counted", 1)
	// The server's stdin passes through tee, which keeps a copy of every line.
	cfg.Command = []string{"sh", "-c", `tee -a "$0" | exec "$1"`, seen, fixtureCommand()[0]}
	e.start(cfg)
	ctx := testenv.Context(t)

	read := func() []map[string]json.RawMessage {
		t.Helper()
		data, err := os.ReadFile(seen)
		if err != nil {
			t.Fatal(err)
		}
		var out []map[string]json.RawMessage
		for line := range bytes.Lines(data) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(line, &m); err != nil {
				t.Fatalf("the server read a line that is not a JSON-RPC message: %q", line)
			}
			out = append(out, m)
		}
		return out
	}
	method := func(m map[string]json.RawMessage) string {
		var s string
		_ = json.Unmarshal(m["method"], &s)
		return s
	}

	// settle waits for n messages after the first before, then a while longer for any
	// the bridge sends on its own time (a ping, a late notification), and returns them
	// all. tee may pass a line on to the server before it writes it to the file.
	settle := func(before, n int) []map[string]json.RawMessage {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, "the server's stdin in the file", func() bool { return len(read())-before >= n })
		time.Sleep(300 * time.Millisecond)
		return read()[before:]
	}
	// A first call opens whatever the bridge opens upstream for a caller's session;
	// what is counted is the calls after it.
	session := call{method: "echo", params: `{"text":"first"}`, session: "sess-1", caps: []string{}}
	start := len(read())
	e.result(t, ctx, "counted", session)
	before := start + len(settle(start, 1))
	const calls = 20
	for i := range calls {
		c := session
		c.params = fmt.Sprintf(`{"text":"hello %d"}`, i)
		if got := texts(e.result(t, ctx, "counted", c)); len(got) != 1 || !strings.Contains(got[0], fmt.Sprintf(`"hello %d"`, i)) {
			t.Fatalf("call %d: %v", i, got)
		}
	}
	msgs := settle(before, calls)
	if len(msgs) != calls {
		for _, m := range msgs {
			t.Logf("upstream read: %s %s", method(m), m["params"])
		}
		t.Fatalf("the server read %d messages for %d calls, want one each", len(msgs), calls)
	}
	for i, m := range msgs {
		var params map[string]json.RawMessage
		_ = json.Unmarshal(m["params"], &params)
		if method(m) != "tools/call" || len(m["id"]) == 0 {
			t.Fatalf("message %d: %s, want a tools/call request", i, method(m))
		}
		if _, ok := params["_meta"]; ok {
			t.Errorf("message %d carries _meta %s though its caller asked for no progress", i, params["_meta"])
		}
		var args map[string]string
		if err := json.Unmarshal(params["arguments"], &args); err != nil || args["text"] != fmt.Sprintf("hello %d", i) {
			t.Errorf("message %d: arguments %s", i, params["arguments"])
		}
	}

	// A caller that follows progress: its call carries a progress token, and still
	// one message.
	before = len(read())
	if _, err := e.do(ctx, "counted", call{method: "echo", params: `{"text":"p"}`, progress: true}); err != nil {
		t.Fatal(err)
	}
	msgs = settle(before, 1)
	if len(msgs) != 1 || method(msgs[0]) != "tools/call" || !bytes.Contains(msgs[0]["params"], []byte(`"progressToken"`)) {
		t.Fatalf("a call that follows progress: the server read %d messages (%v), want one tools/call with a progress token", len(msgs), msgs)
	}
}
