package sse_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestClientsUseALink drives every kind of client through what MCP users do with a
// tool's link: connect, ping, list the tools, call them, follow a call's progress, cancel
// a call, and learn that the tool changed.
func TestClientsUseALink(t *testing.T) {
	e := newEnv(t)
	ed := e.startEdge(t, 0, nil)
	for i, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			s := newSeen()
			c := k.connect(t, e, ed.url, s)
			ctx := testenv.Context(t)
			t.Logf("protocol %s", c.protocol())

			if err := c.ping(ctx); err != nil {
				t.Fatalf("ping: %v", err)
			}
			names, err := c.tools(ctx)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			for _, want := range []string{"echo", "count", "wait", "fail", "ask"} {
				if !slices.Contains(names, want) {
					t.Fatalf("tools/list shows %v, want %s among them", names, want)
				}
			}

			res, err := c.call(ctx, "echo", map[string]any{"text": "hello"}, false)
			if err != nil {
				t.Fatalf("tools/call echo: %v", err)
			}
			if res.isError || res.text != `{"text":"hello"}` || structuredText(res.structured) != "hello" {
				t.Fatalf("echo answered %+v, want the tool's JSON as text and as structured content", res)
			}

			// At 2026-07-28 the region and count travel in Mcp-Param headers too, which
			// the edge checks against the arguments.
			res, err = c.call(ctx, "route", map[string]any{"region": "eu-west ☀", "count": 3}, false)
			if err != nil || res.isError || !strings.Contains(res.text, `"routed":"eu-west ☀"`) {
				t.Fatalf("route (arguments mirrored in headers): %+v %v", res, err)
			}

			res, err = c.call(ctx, "fail", nil, false)
			if err != nil {
				t.Fatalf("tools/call fail: %v", err)
			}
			if !res.isError || !strings.Contains(res.text, "the kit failed on purpose") {
				t.Fatalf("fail answered %+v, want an isError result with the tool's message", res)
			}

			res, err = c.call(ctx, "echo", map[string]any{"text": 3}, false)
			if err != nil {
				t.Fatalf("tools/call echo with bad arguments: %v", err)
			}
			if !res.isError || !strings.Contains(res.text, "/text") {
				t.Fatalf("echo with a number answered %+v, want an isError result naming /text", res)
			}

			if _, err := c.call(ctx, "nope", nil, false); err == nil || !strings.Contains(err.Error(), "unknown tool") {
				t.Fatalf("calling an unknown tool: got %v, want a JSON-RPC error naming the unknown tool", err)
			}

			res, err = c.call(ctx, "count", map[string]any{"n": 3}, true)
			if err != nil || res.isError {
				t.Fatalf("tools/call count: %+v, %v", res, err)
			}
			for want := 1.0; want <= 3; want++ {
				select {
				case got := <-s.progress:
					if got != want {
						t.Fatalf("progress %v, want %v", got, want)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("progress %v never arrived", want)
				}
			}

			id := c.cancelWait(t, e.worker)
			e.worker.waitCancelled(t, id)

			// A client subscribes to changes in the background; keep changing the
			// tool until the client has heard of one.
			added := ""
			for try := 0; ; try++ {
				added = fmt.Sprintf("added-%d-%d", i, try)
				e.addMethod(t, added)
				select {
				case <-s.changed:
					t.Logf("list_changed after %d changes", try+1)
				case <-time.After(2 * time.Second):
					if try < 4 {
						continue
					}
					t.Fatal("no notifications/tools/list_changed after the tool gained methods")
				}
				break
			}
			testenv.Eventually(t, 5*time.Second, "the new method listed", func() bool {
				names, err := c.tools(ctx)
				return err == nil && slices.Contains(names, added)
			})
		})
	}
}
