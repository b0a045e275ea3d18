package sse_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/tsclient"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/sse"
)

// TestTypeScriptClientIsAskedAndTold: a tool's worker asks the TypeScript SDK's client
// to sample a message and to elicit an answer from its user, and the client hears the
// call's progress and log messages; at the SDK's default revision and at 2025-06-18,
// over Streamable HTTP and through toolgate connect.
func TestTypeScriptClientIsAskedAndTold(t *testing.T) {
	e := newEnv(t)
	ed := e.startEdge(t, 0, nil)
	for _, version := range []string{"", "2025-06-18"} {
		for _, through := range []string{"Streamable HTTP", "toolgate connect"} {
			t.Run("over "+through+" at "+cmp(version, "its default"), func(t *testing.T) {
				c, progressEvent := tsclient.HTTP(t, e.streamableURL(ed.url), version), "progress"
				if through == "toolgate connect" {
					// See connectTSStdio for why progress is read off the transport.
					c, progressEvent = tsclient.Stdio(t, version, toolgate(t), "connect", e.streamableURL(ed.url)), "wire-progress"
				}
				ctx := testenv.Context(t)
				do := func(cmd map[string]any) string {
					t.Helper()
					raw, err := c.Do(ctx, cmd)
					if err != nil {
						t.Fatalf("%v: %v\nstderr:\n%s", cmd, err, c.Stderr())
					}
					return string(raw)
				}

				if got := do(map[string]any{"op": "call", "name": "ask"}); !strings.Contains(got, "hi from the client") {
					t.Fatalf("ask (sampling) answered %s", got)
				}
				if _, ok := c.WaitEvent("sampling", 5*time.Second); !ok {
					t.Fatal("the client was never asked to sample")
				}

				if got := do(map[string]any{"op": "call", "name": "confirm"}); !strings.Contains(got, `\"action\":\"accept\"`) || !strings.Contains(got, `\"ok\":true`) {
					t.Fatalf("confirm (elicitation) answered %s", got)
				}
				if e, ok := c.WaitEvent("elicitation", 5*time.Second); !ok || e.Message != "Go ahead?" {
					t.Fatalf("the client was asked %+v, %v", e, ok)
				}

				do(map[string]any{"op": "setLevel", "level": "info"})
				if got := do(map[string]any{"op": "call", "name": "count", "args": map[string]any{"n": 2}, "progress": true}); !strings.Contains(got, "counted") {
					t.Fatalf("count answered %s", got)
				}
				var progress, logs int
				for progress < 2 || logs < 2 {
					select {
					case ev := <-c.Events:
						switch {
						case ev.Event == progressEvent:
							progress++
						case ev.Event == "log" && ev.Level == "info":
							logs++
						}
					case <-time.After(5 * time.Second):
						t.Fatalf("%d progress and %d log notifications, want 2 of each", progress, logs)
					}
				}
			})
		}
	}
}

// TestClientsThatLeaveWithoutDeleteDoNotFillTheLimit: the TypeScript SDK's
// Client.close() ends no session (no DELETE); clients that come and go that way, more
// of them over time than the account may hold sessions at once, are never refused,
// because a session without a stream or a request ends SessionIdle after its last
// request.
func TestClientsThatLeaveWithoutDeleteDoNotFillTheLimit(t *testing.T) {
	const limit, clients = 2, 5
	const idle = time.Second
	e := newEnv(t)
	ctx := testenv.Context(t)
	if _, err := e.store.UpdateAccount(ctx, testAccount, func(a *registry.Account) error {
		a.Limits.Sessions = limit
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ed := e.startEdge(t, 0, func(c *sse.Config) { c.SessionIdle = idle })
	url := e.streamableURL(ed.url)
	open := map[string]bool{} // sessions the clients left behind
	for i := range clients {
		if len(open) >= limit {
			// Wait, as a population of clients does, for a slot to free on its own.
			testenv.Eventually(t, 20*idle, "a left session ended by the idle policy", func() bool {
				for id := range open {
					if _, err := e.store.Session(ctx, id); errors.Is(err, registry.ErrNotFound) {
						delete(open, id)
					}
				}
				return len(open) < limit
			})
		}
		c := tsclient.HTTP(t, url, "")
		if _, err := c.Do(ctx, map[string]any{"op": "tools"}); err != nil {
			t.Fatalf("client %d: tools/list: %v", i, err)
		}
		if _, err := c.Do(ctx, map[string]any{"op": "close"}); err != nil {
			t.Fatalf("client %d: close: %v", i, err)
		}
		if n := ed.deletes.Load(); n != 0 {
			t.Fatalf("client %d: the edge was sent %d DELETE requests: clients end their sessions, so this tests nothing", i, n)
		}
		open[c.Session] = true
	}
}

func cmp(v, otherwise string) string {
	if v == "" {
		return otherwise
	}
	return v
}
