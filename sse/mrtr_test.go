package sse_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestStatelessCallsAskForInput: at 2026-07-28 a tool's worker asks its client for a
// sampled message or the user's answer as at every revision, and the client gets an
// input_required result, answers, and calls again (multi round-trip requests); the
// retry, on any edge, reaches the worker's call, which runs on meanwhile. go-sdk's client does the
// rounds itself, directly and through toolgate connect.
func TestStatelessCallsAskForInput(t *testing.T) {
	e := newEnv(t)
	ed := e.startEdge(t, 0, nil)
	url := e.streamableURL(ed.url)
	clients := map[string]func(t *testing.T) mcpClient{
		"go-sdk over Streamable HTTP": func(t *testing.T) mcpClient {
			return connectGoSDK(t, &mcp.StreamableClientTransport{Endpoint: url}, "", newSeen())
		},
		"go-sdk through toolgate connect": func(t *testing.T) mcpClient {
			return connectGoSDK(t, &mcp.CommandTransport{Command: exec.Command(toolgate(t), "connect", url)}, "", newSeen())
		},
	}
	for name, connect := range clients {
		t.Run(name, func(t *testing.T) {
			c := connect(t)
			if c.protocol() != "2026-07-28" {
				t.Fatalf("the client speaks %s", c.protocol())
			}
			ctx := testenv.Context(t)
			res, err := c.call(ctx, "ask", nil, false)
			if err != nil || res.isError || !strings.Contains(res.text, "hi from the client") {
				t.Fatalf("ask (sampling): %+v %v", res, err)
			}
			res, err = c.call(ctx, "confirm", nil, false)
			if err != nil || res.isError || !strings.Contains(res.text, `"action":"accept"`) || !strings.Contains(res.text, `"ok":true`) {
				t.Fatalf("confirm (elicitation): %+v %v", res, err)
			}
		})
	}

	t.Run("the rounds on the wire", func(t *testing.T) {
		otherURL := ed.url + "/mcp/" + e.otherAccountLink(t)
		callAt := func(url, extra string) map[string]json.RawMessage {
			t.Helper()
			h, body := rev20260728("tools/call", `"name":"ask","arguments":{}`+extra)
			// A client that declares nothing it could be asked gets no round.
			body = strings.Replace(body, `"io.modelcontextprotocol/clientCapabilities":{}`, `"io.modelcontextprotocol/clientCapabilities":{"sampling":{}}`, 1)
			h["Mcp-Name"] = "ask"
			h["Accept"] = "application/json"
			x := do(t, "POST", url, h, body)
			var m struct {
				Result map[string]json.RawMessage `json:"result"`
				Error  *struct {
					Code int64 `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(x.body, &m); err != nil {
				t.Fatalf("%d %s", x.status, x.body)
			}
			if m.Error != nil {
				return map[string]json.RawMessage{"error": json.RawMessage(x.body)}
			}
			return m.Result
		}
		call := func(extra string) map[string]json.RawMessage { return callAt(url, extra) }
		first := call("")
		var requests map[string]struct {
			Method string `json:"method"`
		}
		var state string
		_ = json.Unmarshal(first["inputRequests"], &requests)
		_ = json.Unmarshal(first["requestState"], &state)
		if string(first["resultType"]) != `"input_required"` || len(requests) != 1 || state == "" {
			t.Fatalf("the first round answered %s", mustJSON(first))
		}
		var key string
		for k, r := range requests {
			key = k
			if r.Method != "sampling/createMessage" {
				t.Fatalf("the client is asked %s", r.Method)
			}
		}
		for _, bad := range []string{"nonsense", state[:len(state)-3] + "9.9", "tgr1.abc.def.1.1"} {
			got := call(`,"requestState":"` + bad + `","inputResponses":{}`)
			if !strings.Contains(string(got["error"]), `"code":-32602`) {
				t.Fatalf("a retry naming %q: %s, want invalid params", bad, mustJSON(got))
			}
		}
		testenv.WaitFor(t, "the edge knows the other link", func() bool {
			return do(t, "POST", otherURL, map[string]string{"Accept": "application/json"}, initialize).status == 200
		})
		if got := callAt(otherURL, `,"requestState":"`+state+`","inputResponses":{}`); !strings.Contains(string(got["error"]), `"code":-32602`) {
			t.Fatalf("another account's retry naming the round: %s, want invalid params", mustJSON(got))
		}
		// The retry reaches another edge than the one running the call.
		other := e.startEdge(t, 0, nil)
		final := callAt(e.streamableURL(other.url), `,"requestState":"`+state+`","inputResponses":{"`+key+`":{"role":"assistant","model":"m","content":{"type":"text","text":"hello from the wire"}}}`)
		if string(final["resultType"]) != `"complete"` || !strings.Contains(string(final["content"]), "hello from the wire") {
			t.Fatalf("the retry answered %s", mustJSON(final))
		}
	})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
