package edge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// recordingMCP is an MCP implementation that notes how the edge called it. A message
// whose body is "panic" makes it panic, to show the edge recovering.
type recordingMCP struct {
	mu    sync.Mutex
	calls []mcpCall
}

type mcpCall struct {
	Kind, HTTPMethod, Tool, MessagesPath, Account, Body string
	ByKey                                               bool
}

func (m *recordingMCP) record(kind string, r *http.Request, p registry.Principal, tool, messagesPath string) {
	body, _ := io.ReadAll(r.Body)
	if string(body) == "panic" {
		panic("the MCP implementation failed")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, mcpCall{Kind: kind, HTTPMethod: r.Method, Tool: tool, MessagesPath: messagesPath,
		Account: p.Account, ByKey: p.Key != nil, Body: string(body)})
}

func (m *recordingMCP) last() mcpCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.calls) == 0 {
		return mcpCall{}
	}
	return m.calls[len(m.calls)-1]
}

func (m *recordingMCP) ServeSSE(w http.ResponseWriter, r *http.Request, p registry.Principal, tool, messagesPath string) {
	m.record("sse", r, p, tool, messagesPath)
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, "event: endpoint\ndata: "+messagesPath+"\n\n")
}

func (m *recordingMCP) ServeMessages(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string) {
	m.record("messages", r, p, tool, "")
	w.WriteHeader(http.StatusAccepted)
}

func (m *recordingMCP) Drain(context.Context) error { return nil }

func (m *recordingMCP) ServeStreamable(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string) {
	m.record("streamable", r, p, tool, "")
	w.WriteHeader(http.StatusOK)
}

// TestMCPSeam: the edge authenticates MCP routes (the link in the path, or an API key
// on /tools/{tool}/...) and hands the principal and tool to the MCP implementation;
// dead links, hidden tools and missing keys never reach it.
func TestMCPSeam(t *testing.T) {
	exp := spans()
	mcp := &recordingMCP{}
	e := newEnv(t, withEdge(func(c *edge.Config) { c.MCP = mcp }), withPayloadLimit(2<<20))
	key := e.account("acme", registry.Limits{})
	e.account("other", registry.Limits{})
	e.serve(echoTool, echo)
	e.deploy(registry.Tool{ID: "secret", Methods: []registry.Method{{Name: "x"}}})
	e.connect("other", "secret")
	conn := e.connect("acme", "echo")
	token := e.signer.Token("acme", "echo", conn.LinkNonce)

	want := func(t *testing.T, r result, status int, c mcpCall) {
		t.Helper()
		if r.status != status {
			t.Fatalf("status %d, want %d; %s", r.status, status, r.body)
		}
		if got := mcp.last(); got != c {
			t.Fatalf("MCP saw %+v, want %+v", got, c)
		}
	}
	t.Run("a link's SSE stream is told where to post its messages", func(t *testing.T) {
		r := e.do(http.MethodGet, "/mcp/"+token+"/sse", "")
		want(t, r, http.StatusOK, mcpCall{Kind: "sse", HTTPMethod: "GET", Tool: "echo", Account: "acme", MessagesPath: "/mcp/" + token + "/messages"})
		if !strings.Contains(string(r.body), "/mcp/"+token+"/messages") {
			t.Fatalf("stream %q", r.body)
		}
	})
	t.Run("a link's messages and Streamable HTTP reach the MCP implementation", func(t *testing.T) {
		want(t, e.do(http.MethodPost, "/mcp/"+token+"/messages?sessionId=s1", `{"jsonrpc":"2.0"}`), http.StatusAccepted,
			mcpCall{Kind: "messages", HTTPMethod: "POST", Tool: "echo", Account: "acme", Body: `{"jsonrpc":"2.0"}`})
		for _, method := range []string{"POST", "GET", "DELETE"} {
			want(t, e.do(method, "/mcp/"+token, ""), http.StatusOK, mcpCall{Kind: "streamable", HTTPMethod: method, Tool: "echo", Account: "acme"})
		}
	})
	t.Run("an API key reaches a tool's MCP routes", func(t *testing.T) {
		want(t, e.do(http.MethodPost, "/tools/echo/mcp", "", "SERVICE_API_KEY", key), http.StatusOK,
			mcpCall{Kind: "streamable", HTTPMethod: "POST", Tool: "echo", Account: "acme", ByKey: true})
		want(t, e.do(http.MethodGet, "/tools/echo/sse", "", "Authorization", "Bearer "+key), http.StatusOK,
			mcpCall{Kind: "sse", HTTPMethod: "GET", Tool: "echo", Account: "acme", ByKey: true, MessagesPath: "/tools/echo/sse/messages"})
		want(t, e.do(http.MethodPost, "/tools/echo/sse/messages", "{}", "SERVICE_API_KEY", key), http.StatusAccepted,
			mcpCall{Kind: "messages", HTTPMethod: "POST", Tool: "echo", Account: "acme", ByKey: true, Body: "{}"})
	})
	t.Run("refusals never reach the MCP implementation", func(t *testing.T) {
		before := mcp.last()
		e.do(http.MethodGet, "/mcp/tgl_unknown/sse", "").expect(t, http.StatusNotFound, edge.CodeNotFound)
		e.do(http.MethodPost, "/tools/echo/mcp", "").expect(t, http.StatusUnauthorized, edge.CodeUnauthenticated)
		e.do(http.MethodPost, "/tools/secret/mcp", "", "SERVICE_API_KEY", key).expect(t, http.StatusNotFound, edge.CodeToolNotFound)
		big := strings.Repeat("x", int(e.edge.MaxPayloadBytes())+1) // an MCP message may be as large as a call
		e.do(http.MethodPost, "/mcp/"+token+"/messages", big).expect(t, http.StatusRequestEntityTooLarge, edge.CodePayloadTooLarge)
		if mcp.last() != before {
			t.Fatalf("MCP was called: %+v", mcp.last())
		}
	})
	t.Run("a rotated link is dead", func(t *testing.T) {
		if _, err := e.store.RotateLink(testenv.Context(t), "acme", "echo", e.signer); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, "the old link answers 404", func() bool {
			return e.do(http.MethodGet, "/mcp/"+token+"/sse", "").status == http.StatusNotFound
		})
	})
	t.Run("a panic is a 500 envelope and the edge goes on", func(t *testing.T) {
		e.do(http.MethodPost, "/tools/echo/mcp", "panic", "SERVICE_API_KEY", key).expect(t, http.StatusInternalServerError, edge.CodeInternal)
		if r := e.do(http.MethodGet, "/healthz", ""); r.status != http.StatusOK {
			t.Fatalf("after a panic: %d", r.status)
		}
		if !strings.Contains(e.logs.String(), "the MCP implementation failed") {
			t.Fatal("the panic was not logged")
		}
	})

	// Neither the log nor the traces hold the link token or the API key.
	testenv.WaitFor(t, "the spans are exported", func() bool { return len(exp.GetSpans()) > 0 })
	spanText, _ := json.Marshal(exp.GetSpans())
	for what, text := range map[string]string{"log": e.logs.String(), "spans": string(spanText)} {
		if strings.Contains(text, token) || strings.Contains(text, key) {
			t.Errorf("the %s holds a secret", what)
		}
	}
	if !strings.Contains(e.logs.String(), `"route":"/mcp/:link/sse"`) {
		t.Error("the log does not name the link routes by pattern")
	}
}

// TestAccessLogHoldsNoSecrets: keys and parameters never reach the log, whichever way
// they were sent.
func TestAccessLogHoldsNoSecrets(t *testing.T) {
	e := newEnv(t)
	key := e.account("acme", registry.Limits{})
	e.serve(emailTool, echo)
	e.connect("acme", "email")
	const secretParam = "the-launch-codes@example.com"
	params := `{"to":"` + secretParam + `","subject":"s3cr3t-subject","body":"b0dy"}`
	e.call(key, "email", "send_email", params)
	e.call(key, "email", "send_email", `{"to":"`+secretParam+`"}`)
	e.do(http.MethodPost, "/tool-call/email/send_email?key="+key+"&q="+secretParam, params, "Authorization", "Bearer "+key)
	e.do(http.MethodPost, "/admin/keys", `{"account":"acme"}`, "Authorization", "Bearer "+e.adminKey)

	log := e.logs.String()
	for _, secret := range []string{key, e.adminKey, secretParam, "s3cr3t-subject", "b0dy"} {
		if strings.Contains(log, secret) {
			t.Fatalf("the log holds %q:\n%s", secret, log)
		}
	}
	var lines int
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON log line: %s", line)
		}
		if rec["msg"] == "http request" {
			lines++
			if rec["request_id"] == "" || rec["route"] == nil || rec["status"] == nil || rec["duration_us"] == nil {
				t.Fatalf("access log line lacks fields: %s", line)
			}
		}
	}
	if lines < 4 {
		t.Fatalf("%d access log lines for 4 requests", lines)
	}
}

// TestDashboardSeam: a dashboard handler given in the config serves every path under
// /dashboard/; without one those paths are 404s in the envelope.
func TestDashboardSeam(t *testing.T) {
	var paths []string
	var mu sync.Mutex
	dash := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<h1>dashboard</h1>")
	})
	e := newEnv(t, withEdge(func(c *edge.Config) { c.Dashboard = dash }))
	for _, r := range []struct{ method, path string }{{"GET", "/dashboard/"}, {"GET", "/dashboard/tools/echo/api"}, {"POST", "/dashboard/signin"}} {
		if got := e.do(r.method, r.path, ""); got.status != http.StatusOK || string(got.body) != "<h1>dashboard</h1>" {
			t.Fatalf("%s %s: %d %s", r.method, r.path, got.status, got.body)
		}
	}
	if want := []string{"GET /dashboard/", "GET /dashboard/tools/echo/api", "POST /dashboard/signin"}; strings.Join(paths, ",") != strings.Join(want, ",") {
		t.Fatalf("the dashboard saw %v, want %v", paths, want)
	}
	req, _ := http.NewRequest(http.MethodGet, e.url+"/dashboard", nil)
	resp, err := (&http.Transport{}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/dashboard/" {
		t.Fatalf("/dashboard: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	off := newEnv(t)
	off.do(http.MethodGet, "/dashboard/", "").expect(t, http.StatusNotFound, edge.CodeNotFound)
}
