package sse_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/sse"
)

// exchange is one raw HTTP request and what came back.
type exchange struct {
	status int
	header http.Header
	body   []byte
}

// do sends one raw HTTP request; a request that fails fails the test.
func do(t testing.TB, method, url string, header map[string]string, body string) exchange {
	t.Helper()
	x, err := exchangeWith(method, url, header, body)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// exchangeWith sends one raw HTTP request and returns what failed rather than
// failing the test: for a goroutine the test starts, where t.Fatal must not run.
func exchangeWith(method, url string, header map[string]string, body string) (exchange, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return exchange{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return exchange{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return exchange{resp.StatusCode, resp.Header, b}, nil
}

// rpcError reads the JSON-RPC error of a response body, or of the first event of a
// stream.
func (x exchange) rpcError() (code int64, message string) {
	body := x.body
	if strings.HasPrefix(x.header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(body), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.TrimSpace(d) != "" {
				body = []byte(d)
				break
			}
		}
	}
	var m struct {
		Error *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &m) != nil || m.Error == nil {
		return 0, ""
	}
	return m.Error.Code, m.Error.Message
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// initSession opens a Streamable HTTP session and returns its id.
func initSession(t testing.TB, url string) string {
	t.Helper()
	x := do(t, "POST", url, map[string]string{"Accept": "application/json, text/event-stream"}, initialize)
	if x.status != http.StatusOK || x.header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d %s", x.status, x.body)
	}
	return x.header.Get("Mcp-Session-Id")
}

// rev20260728 is the body and headers of a 2026-07-28 request.
func rev20260728(method, params string) (map[string]string, string) {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	if params == "" {
		params = "{" + meta + "}"
	} else {
		params = "{" + meta + "," + params + "}"
	}
	return map[string]string{
			"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method,
		},
		`{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":` + params + `}`
}

// TestRequestsTurnedAway checks what a client sees for requests that cannot be
// served: the status and the JSON-RPC error code.
func TestRequestsTurnedAway(t *testing.T) {
	e := newEnv(t)
	ed := e.startEdge(t, 0, nil)
	mcpURL := e.streamableURL(ed.url)
	session := initSession(t, mcpURL)
	sessionHeaders := map[string]string{"Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{}
		for k, v := range sessionHeaders {
			h[k] = v
		}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	toolsList := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

	tests := []struct {
		name     string
		method   string
		url      string
		header   map[string]string
		body     string
		status   int
		code     int64  // JSON-RPC error code, 0 for none expected
		contains string // in the body
	}{
		{"a foreign Origin is refused", "POST", mcpURL, map[string]string{"Origin": "https://evil.example.com"}, initialize, 403, -32600, "origin"},
		{"a foreign Origin is refused on the legacy stream", "GET", e.sseURL(ed.url), map[string]string{"Origin": "https://evil.example.com"}, "", 403, -32600, "origin"},
		{"a foreign Host is refused on a loopback listener", "POST", mcpURL, map[string]string{"Host": "evil.example.com"}, initialize, 403, -32600, "host"},
		{"the edge's own origin is let in", "POST", mcpURL, map[string]string{"Origin": ed.url, "Accept": "application/json"}, initialize, 200, 0, "serverInfo"},
		{"localhost by name is let in", "POST", mcpURL, map[string]string{"Host": "localhost", "Accept": "application/json"}, initialize, 200, 0, "serverInfo"},
		{"an unknown session is not found, answering the request's id", "POST", mcpURL, with(map[string]string{"Mcp-Session-Id": "NoSuchSession0000000000"}), toolsList, 404, -32600, `"id":2`},
		{"a request without a session is refused with its id", "POST", mcpURL, map[string]string{"Mcp-Protocol-Version": "2025-11-25"}, toolsList, 400, -32600, `"id":2`},
		{"an unknown legacy session is not found", "POST", e.messagesURL(ed.url, "NoSuchSession0000000000"), nil, toolsList, 404, -32600, "session"},
		{"a request without a session is a bad request", "POST", mcpURL, map[string]string{"Mcp-Protocol-Version": "2025-11-25"}, toolsList, 400, -32600, "Mcp-Session-Id"},
		{"the legacy endpoint needs its session_id", "POST", ed.url + "/mcp/" + e.link + "/messages", nil, toolsList, 400, -32600, "session_id"},
		{"bad JSON is a parse error", "POST", mcpURL, sessionHeaders, `{"jsonrpc":"2.0",`, 400, -32700, "Parse error"},
		{"bad JSON on the legacy endpoint is a parse error", "POST", "", nil, `not json`, 400, -32700, "Parse error"},
		{"a batch is refused", "POST", mcpURL, sessionHeaders, "[" + toolsList + "]", 400, -32600, "batch"},
		{"a body that is not JSON is unsupported", "POST", mcpURL, with(map[string]string{"Content-Type": "text/plain"}), toolsList, 415, -32600, "application/json"},
		{"an unsupported protocol version is refused", "POST", mcpURL, with(map[string]string{"Mcp-Protocol-Version": "1999-01-01"}), toolsList, 400, -32022, "1999-01-01"},
		{"PUT is not allowed", "PUT", mcpURL, nil, "", 405, -32600, ""},
		{"POST is not how a legacy stream opens", "POST", e.sseURL(ed.url), nil, initialize, 405, -32600, "GET"},
		{"GET is not how legacy messages go", "GET", ed.url + "/mcp/" + e.link + "/messages?session_id=" + session, nil, "", 405, -32600, "POST"},
		{"an unknown method is method not found", "POST", mcpURL, sessionHeaders, `{"jsonrpc":"2.0","id":3,"method":"nope/nope"}`, 200, -32601, "nope/nope"},
	}
	legacy := openLegacyStream(t, e.sseURL(ed.url))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := tt.url
			if url == "" {
				url = ed.url + legacy.endpoint
			}
			x := do(t, tt.method, url, tt.header, tt.body)
			if x.status != tt.status {
				t.Fatalf("status %d, want %d (%s)", x.status, tt.status, x.body)
			}
			if code, msg := x.rpcError(); code != tt.code || !strings.Contains(strings.ToLower(msg+string(x.body)), strings.ToLower(tt.contains)) {
				t.Fatalf("error %d %q, want %d mentioning %q (%s)", code, msg, tt.code, tt.contains, x.body)
			}
		})
	}
}

// TestStatelessRequests checks the 2026-07-28 rules on the same endpoint: no session,
// headers that must agree with the body, server/discover.
func TestStatelessRequests(t *testing.T) {
	e := newEnv(t)
	ed := e.startEdge(t, 0, nil)
	url := e.streamableURL(ed.url)

	h, body := rev20260728("server/discover", "")
	x := do(t, "POST", url, h, body)
	if x.status != 200 || x.header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("server/discover: %d %v %s", x.status, x.header, x.body)
	}
	var discovered struct {
		Result struct {
			SupportedVersions []string       `json:"supportedVersions"`
			Capabilities      map[string]any `json:"capabilities"`
			ResultType        string         `json:"resultType"`
			Meta              map[string]any `json:"_meta"`
		} `json:"result"`
	}
	if err := json.Unmarshal(x.body, &discovered); err != nil {
		t.Fatal(err)
	}
	r := discovered.Result
	if len(r.SupportedVersions) != 5 || r.SupportedVersions[0] != "2026-07-28" || r.Capabilities["tools"] == nil ||
		r.ResultType != "complete" || r.Meta["io.modelcontextprotocol/serverInfo"] == nil {
		t.Fatalf("server/discover answered %s", x.body)
	}

	h, body = rev20260728("tools/call", `"name":"echo","arguments":{"text":"stateless"}`)
	h["Mcp-Name"] = "echo"
	h["Accept"] = "application/json"
	x = do(t, "POST", url, h, body)
	if x.status != 200 || !strings.Contains(string(x.body), `stateless`) || !strings.Contains(string(x.body), `"resultType":"complete"`) {
		t.Fatalf("stateless tools/call: %d %s", x.status, x.body)
	}

	tests := []struct {
		name   string
		edit   func(h map[string]string) string // returns the body
		status int
		code   int64
	}{
		{"Mcp-Method must match the body", func(h map[string]string) string {
			h["Mcp-Method"] = "tools/list"
			_, b := rev20260728("tools/call", `"name":"echo","arguments":{"text":"x"}`)
			h["Mcp-Name"] = "echo"
			return b
		}, 400, -32020},
		{"tools/call needs Mcp-Name", func(h map[string]string) string {
			h["Mcp-Method"] = "tools/call"
			_, b := rev20260728("tools/call", `"name":"echo","arguments":{"text":"x"}`)
			return b
		}, 400, -32020},
		{"Mcp-Name must match the tool called", func(h map[string]string) string {
			h["Mcp-Method"] = "tools/call"
			h["Mcp-Name"] = "fail"
			_, b := rev20260728("tools/call", `"name":"echo","arguments":{"text":"x"}`)
			return b
		}, 400, -32020},
		{"Mcp-Name may be base64", func(h map[string]string) string {
			h["Mcp-Method"] = "tools/call"
			h["Mcp-Name"] = "=?base64?ZWNobw==?="
			_, b := rev20260728("tools/call", `"name":"echo","arguments":{"text":"x"}`)
			return b
		}, 200, 0},
		{"the version header must match _meta", func(h map[string]string) string {
			h["Mcp-Protocol-Version"] = "2025-11-25"
			h["Mcp-Method"] = "tools/list"
			_, b := rev20260728("tools/list", "")
			return b
		}, 400, -32020},
		{"an unknown later version is refused with the supported ones", func(h map[string]string) string {
			h["Mcp-Protocol-Version"] = "2027-01-01"
			h["Mcp-Method"] = "tools/list"
			_, b := rev20260728("tools/list", "")
			return strings.ReplaceAll(b, "2026-07-28", "2027-01-01")
		}, 400, -32022},
		{"an unknown method is not found", func(h map[string]string) string {
			h["Mcp-Method"] = "nope/nope"
			_, b := rev20260728("nope/nope", "")
			return b
		}, 404, -32601},
		{"ping is gone", func(h map[string]string) string {
			h["Mcp-Method"] = "ping"
			_, b := rev20260728("ping", "")
			return b
		}, 404, -32601},
		{"a ping without _meta asks nothing to check and is answered", func(h map[string]string) string {
			h["Mcp-Method"] = "ping"
			return `{"jsonrpc":"2.0","id":7,"method":"ping"}`
		}, 200, 0},
		{"a request without _meta is invalid params", func(h map[string]string) string {
			h["Mcp-Method"] = "server/discover"
			return `{"jsonrpc":"2.0","id":7,"method":"server/discover","params":{}}`
		}, 400, -32602},
		{"_meta without its protocol version is invalid params", func(h map[string]string) string {
			h["Mcp-Method"] = "server/discover"
			return `{"jsonrpc":"2.0","id":7,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}`
		}, 400, -32602},
		{"an argument mirrored in a header needs its Mcp-Param header", func(h map[string]string) string {
			h["Mcp-Method"], h["Mcp-Name"] = "tools/call", "route"
			_, b := rev20260728("tools/call", `"name":"route","arguments":{"region":"eu"}`)
			return b
		}, 400, -32020},
		{"an Mcp-Param header must match its argument", func(h map[string]string) string {
			h["Mcp-Method"], h["Mcp-Name"], h["Mcp-Param-Region"] = "tools/call", "route", "us"
			_, b := rev20260728("tools/call", `"name":"route","arguments":{"region":"eu"}`)
			return b
		}, 400, -32020},
		{"an Mcp-Param header may be base64", func(h map[string]string) string {
			h["Mcp-Method"], h["Mcp-Name"], h["Mcp-Param-Region"], h["Mcp-Param-Count"] = "tools/call", "route", "=?base64?ZXU=?=", "3"
			_, b := rev20260728("tools/call", `"name":"route","arguments":{"region":"eu","count":3}`)
			return b
		}, 200, 0},
		{"an Mcp-Param header's base64 must be valid", func(h map[string]string) string {
			h["Mcp-Method"], h["Mcp-Name"], h["Mcp-Param-Region"] = "tools/call", "route", "=?base64?ZXU?="
			_, b := rev20260728("tools/call", `"name":"route","arguments":{"region":"eu"}`)
			return b
		}, 400, -32020},
		{"a value that is not wrapped whole is taken as it is", func(h map[string]string) string {
			h["Mcp-Method"], h["Mcp-Name"], h["Mcp-Param-Region"] = "tools/call", "route", "=?base64?ZXU="
			_, b := rev20260728("tools/call", `"name":"route","arguments":{"region":"=?base64?ZXU="}`)
			return b
		}, 200, 0},
		{"no Mcp-Param header for an absent argument", func(h map[string]string) string {
			h["Mcp-Method"], h["Mcp-Name"], h["Mcp-Param-Region"], h["Mcp-Param-Count"] = "tools/call", "route", "eu", "3"
			_, b := rev20260728("tools/call", `"name":"route","arguments":{"region":"eu"}`)
			return b
		}, 400, -32020},
		{"initialize is not a method of this revision", func(h map[string]string) string {
			h["Mcp-Method"] = "initialize"
			return initialize // the same body as a session's
		}, 404, -32601},
		{"logging/setLevel is gone", func(h map[string]string) string {
			h["Mcp-Method"] = "logging/setLevel"
			_, b := rev20260728("logging/setLevel", `"level":"debug"`)
			return b
		}, 404, -32601},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := rev20260728("tools/list", "")
			h["Accept"] = "application/json"
			body := tt.edit(h)
			x := do(t, "POST", url, h, body)
			if x.status != tt.status {
				t.Fatalf("status %d, want %d (%s)", x.status, tt.status, x.body)
			}
			if code, _ := x.rpcError(); code != tt.code {
				t.Fatalf("code %d, want %d (%s)", code, tt.code, x.body)
			}
			var id struct {
				ID json.RawMessage `json:"id"`
			}
			if err := json.Unmarshal(x.body, &id); err != nil || len(id.ID) == 0 {
				t.Fatalf("the answer names no id: %s", x.body)
			}
		})
	}

	t.Run("the unsupported-version error lists what is supported", func(t *testing.T) {
		h, body := rev20260728("tools/list", "")
		h["Mcp-Protocol-Version"] = "2027-01-01"
		x := do(t, "POST", url, h, strings.ReplaceAll(body, "2026-07-28", "2027-01-01"))
		if !strings.Contains(string(x.body), `"supported":["2026-07-28","2025-11-25"`) {
			t.Fatalf("got %s", x.body)
		}
	})
	t.Run("GET and DELETE are gone", func(t *testing.T) {
		for _, m := range []string{"GET", "DELETE"} {
			if x := do(t, m, url, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Accept": "text/event-stream"}, ""); x.status != 405 {
				t.Fatalf("%s: %d, want 405", m, x.status)
			}
		}
	})
}

// TestAcceptTolerance serves clients that list only one of the two types MCP asks
// them to accept, in that type.
func TestAcceptTolerance(t *testing.T) {
	e := newEnv(t)
	ed := e.startEdge(t, 0, nil)
	url := e.streamableURL(ed.url)
	for accept, want := range map[string]string{
		"application/json":  "application/json",
		"text/event-stream": "text/event-stream",
		"":                  "application/json",
	} {
		x := do(t, "POST", url, map[string]string{"Accept": accept}, initialize)
		if x.status != 200 || !strings.HasPrefix(x.header.Get("Content-Type"), want) || !strings.Contains(string(x.body), "serverInfo") {
			t.Fatalf("Accept %q: %d %s %s, want %s", accept, x.status, x.header.Get("Content-Type"), x.body, want)
		}
	}
	if x := do(t, "POST", url, map[string]string{"Accept": "text/html"}, initialize); x.status != http.StatusNotAcceptable {
		t.Fatalf("Accept text/html: %d, want 406", x.status)
	}
}

// TestCallAnswerType: a client that takes either type gets a call's answer as plain
// JSON when nothing came before it, and a stream when progress or log messages did.
func TestCallAnswerType(t *testing.T) {
	e := newEnv(t)
	ed := e.startEdge(t, 0, nil)
	url := e.streamableURL(ed.url)
	session := initSession(t, url)
	either := map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Session-Id": session}
	answeredAs := func(body string) string {
		t.Helper()
		x := do(t, "POST", url, either, body)
		if x.status != http.StatusOK || !strings.Contains(string(x.body), `"result"`) {
			t.Fatalf("%s: %d %s", body, x.status, x.body)
		}
		ct, _, _ := strings.Cut(x.header.Get("Content-Type"), ";")
		return ct
	}
	const plain = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	const progress = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"count","arguments":{"n":1},"_meta":{"progressToken":"p"}}}`
	if ct := answeredAs(plain); ct != "application/json" {
		t.Fatalf("a call without progress or logs answered as %s, want application/json", ct)
	}
	if ct := answeredAs(progress); ct != "text/event-stream" {
		t.Fatalf("a call with a progressToken answered as %s, want text/event-stream", ct)
	}
	if ct := answeredAs(`{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"debug"}}`); ct != "application/json" {
		t.Fatalf("logging/setLevel answered as %s", ct)
	}
	if ct := answeredAs(strings.Replace(plain, `"id":2`, `"id":5`, 1)); ct != "application/json" {
		t.Fatalf("a call that logged nothing, once the session set a log level, answered as %s, want application/json", ct)
	}
	const logs = `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"count","arguments":{"n":2}}}`
	if ct := answeredAs(logs); ct != "text/event-stream" {
		t.Fatalf("a call that logged, once the session set a log level, answered as %s, want text/event-stream", ct)
	}
}

// TestLongCallAnswersOnAStream: a call with nothing to send before its answer is plain
// JSON when it answers within StreamAfter, and a resumable stream when it runs longer:
// a priming event (an id, the retry delay, no data) first, then the answer; a client
// whose connection breaks after the priming event resumes it with Last-Event-ID and
// gets the answer.
func TestLongCallAnswersOnAStream(t *testing.T) {
	const after = 300 * time.Millisecond
	e := newEnv(t)
	ed := e.startEdge(t, 0, func(c *sse.Config) { c.StreamAfter = after })
	url := e.streamableURL(ed.url)
	session := initSession(t, url)
	either := map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Session-Id": session}
	sleep := func(id int, d time.Duration) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":%d}}}`, id, d.Milliseconds())
	}

	x := do(t, "POST", url, either, sleep(2, 0))
	if ct := x.header.Get("Content-Type"); x.status != http.StatusOK || !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("a quick call: %d %s %s, want application/json", x.status, ct, x.body)
	}

	x = do(t, "POST", url, either, sleep(3, 3*after))
	if ct := x.header.Get("Content-Type"); x.status != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("a call past StreamAfter: %d %s %s, want text/event-stream", x.status, ct, x.body)
	}
	first, rest, _ := strings.Cut(string(x.body), "\n\n")
	if !strings.HasPrefix(first, "id: ") || !strings.Contains(first, "\nretry: ") || !strings.HasSuffix(first, "\ndata: ") {
		t.Fatalf("the stream does not open with a priming event: %q", x.body)
	}
	if !strings.Contains(rest, `"id":3`) || !strings.Contains(rest, "slept") {
		t.Fatalf("the stream carries no answer: %q", x.body)
	}

	// The connection breaks once the call turned into a stream; the client comes
	// back with the priming event's id.
	stream := openStream(t, "POST", url, either, sleep(4, 4*after))
	lastID := strings.TrimPrefix(stream.nextLine(t, 10*time.Second, func(l string) bool { return strings.HasPrefix(l, "id: ") }), "id: ")
	stream.close()
	resumed := openStream(t, "GET", url, map[string]string{"Accept": "text/event-stream", "Mcp-Session-Id": session, "Last-Event-ID": lastID}, "")
	for {
		_, data := resumed.next(t, "")
		if strings.Contains(data, `"id":4`) {
			if !strings.Contains(data, "slept") {
				t.Fatalf("the resumed stream answered %s", data)
			}
			break
		}
	}
}

// TestJSONCallClientLeaving: a client that closes the POST of a call it would take as
// JSON, before the call turned into a stream it could resume, cancels the call: the
// worker hears the cancel. And the edge goes on answering the session's next call.
func TestJSONCallClientLeaving(t *testing.T) {
	e := newEnv(t)
	ed := e.startEdge(t, 0, func(c *sse.Config) { c.StreamAfter = testenv.Patience })
	url := e.streamableURL(ed.url)
	session := initSession(t, url)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url,
		strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"wait","arguments":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	answered := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	id := e.worker.waitStarted(t)
	cancel()
	if err := <-answered; err == nil {
		t.Fatal("the POST was answered, want it given up by its client")
	}
	e.worker.waitCancelled(t, id)

	x := do(t, "POST", url, map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Session-Id": session},
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still here"}}}`)
	if ct := x.header.Get("Content-Type"); x.status != http.StatusOK || !strings.HasPrefix(ct, "application/json") || !strings.Contains(string(x.body), "still here") {
		t.Fatalf("the next call: %d %s %s", x.status, ct, x.body)
	}
}

// TestSessionLimit opens sessions up to the account's limit and one more.
func TestSessionLimit(t *testing.T) {
	e := newEnv(t)
	ctx := testenv.Context(t)
	if _, err := e.store.UpdateAccount(ctx, testAccount, func(a *registry.Account) error {
		a.Limits.Sessions = 2 // overrides the edge's 5
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ed := e.startEdge(t, 0, func(c *sse.Config) { c.MaxSessionsPerAccount = 5 })
	url := e.streamableURL(ed.url)
	first := initSession(t, url)
	openLegacyStream(t, e.sseURL(ed.url)) // a legacy stream is a session too

	x := do(t, "POST", url, map[string]string{"Accept": "application/json"}, initialize)
	if code, msg := x.rpcError(); x.status != http.StatusTooManyRequests || code != -32000 || !strings.Contains(msg, "2 MCP sessions") {
		t.Fatalf("third session: %d %s, want 429 saying the account holds 2 sessions", x.status, x.body)
	}
	if x := do(t, "GET", e.sseURL(ed.url), map[string]string{"Accept": "text/event-stream"}, ""); x.status != http.StatusTooManyRequests {
		t.Fatalf("third session over SSE: %d %s, want 429", x.status, x.body)
	}

	if x := do(t, "DELETE", url, map[string]string{"Mcp-Session-Id": first}, ""); x.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", x.status, x.body)
	}
	testenv.WaitFor(t, "a session freed by DELETE", func() bool {
		x := do(t, "POST", url, map[string]string{"Accept": "application/json"}, initialize)
		return x.status == http.StatusOK
	})
	if x := do(t, "POST", url, map[string]string{"Mcp-Session-Id": first, "Accept": "application/json"}, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); x.status != http.StatusNotFound {
		t.Fatalf("a deleted session: %d, want 404", x.status)
	}
}

// legacyStream is an open HTTP+SSE stream read line by line.
type legacyStream struct {
	endpoint string
	firstID  string
	lines    chan string
	close    func()
}

func openLegacyStream(t testing.TB, url string) *legacyStream {
	t.Helper()
	return openStream(t, "GET", url, map[string]string{"Accept": "text/event-stream"}, "")
}

// openStream sends a request answered with an event stream; for a legacy stream it
// reads up to the endpoint event.
func openStream(t testing.TB, method, url string, header map[string]string, body string) *legacyStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	s := &legacyStream{lines: make(chan string, 1024), close: func() { cancel(); resp.Body.Close() }}
	t.Cleanup(s.close)
	go func() {
		defer close(s.lines)
		br := bufio.NewReader(resp.Body)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			s.lines <- strings.TrimRight(l, "\n")
		}
	}()
	if strings.HasSuffix(url, "/sse") {
		id, data := s.next(t, "endpoint")
		s.endpoint, s.firstID = data, id
	}
	return s
}

// next reads up to the next event named name ("" for any) and returns its id and data.
func (s *legacyStream) next(t testing.TB, name string) (id, data string) {
	t.Helper()
	timeout := time.After(testenv.Patience)
	var event string
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatal("the stream ended")
			}
			switch {
			case strings.HasPrefix(l, "id: "):
				id = strings.TrimPrefix(l, "id: ")
			case strings.HasPrefix(l, "event: "):
				event = strings.TrimPrefix(l, "event: ")
			case strings.HasPrefix(l, "data: "):
				data = strings.TrimPrefix(l, "data: ")
			case l == "":
				if data != "" && (name == "" || name == event) {
					return id, data
				}
				id, event, data = "", "", ""
			}
		case <-timeout:
			t.Fatalf("no %q event within %v", name, testenv.Patience)
		}
	}
}

// nextLine reads lines until one satisfies match; within is how soon it is expected,
// the test waits up to testenv.Patience if longer.
func (s *legacyStream) nextLine(t testing.TB, within time.Duration, match func(string) bool) string {
	t.Helper()
	within = max(within, testenv.Patience)
	timeout := time.After(within)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatal("the stream ended")
			}
			if match(l) {
				return l
			}
		case <-timeout:
			t.Fatalf("no matching line within %v", within)
			return ""
		}
	}
}

// TestSessionLimitHoldsAcrossEdges: sessions opened at the same instant through two
// edges never exceed the account's limit, and every one refused is gone from the
// bucket; on one node, and on two nodes of a cluster.
func TestSessionLimitHoldsAcrossEdges(t *testing.T) {
	t.Run("one node", func(t *testing.T) { sessionLimitAcrossEdges(t, newEnv(t), 0, 0) })
	t.Run("two nodes of a cluster", func(t *testing.T) { sessionLimitAcrossEdges(t, newClusterEnv(t), 0, 2) })
}

func sessionLimitAcrossEdges(t *testing.T, e *env, node1, node2 int) {
	ctx := testenv.Context(t)
	const limit = 3
	if _, err := e.store.UpdateAccount(ctx, testAccount, func(a *registry.Account) error {
		a.Limits.Sessions = limit
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	urls := []string{e.streamableURL(e.startEdge(t, node1, nil).url), e.streamableURL(e.startEdge(t, node2, nil).url)}

	const attempts = 16
	var admitted, refused atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range attempts {
		wg.Go(func() {
			<-start
			x, err := exchangeWith("POST", urls[i%2], map[string]string{"Accept": "application/json"}, initialize)
			if err != nil {
				t.Error(err)
				return
			}
			switch code, _ := x.rpcError(); {
			case x.status == http.StatusOK:
				admitted.Add(1)
			case x.status == http.StatusTooManyRequests && code == -32000:
				refused.Add(1)
			default:
				t.Errorf("initialize: %d %s", x.status, x.body)
			}
		})
	}
	close(start)
	wg.Wait()
	if admitted.Load() != limit || refused.Load() != attempts-limit {
		t.Fatalf("%d sessions admitted and %d refused through two edges, want %d and %d", admitted.Load(), refused.Load(), limit, attempts-limit)
	}
	kv, err := e.store.JetStream().KeyValue(ctx, registry.BucketSessions)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the bucket holds only the admitted sessions", func() bool {
		keys, err := kv.Keys(ctx)
		return err == nil && len(keys) == limit
	})
}

// TestResultsInTheShapeOfTheirRevision: caching hints (ttlMs, cacheScope) are
// 2026-07-28's and only there, valid; a session of 2025-11-25 sees none. What the
// tool's MCP server declared (list changes, extensions) reaches a session's client;
// at 2026-07-28 what that revision dropped does not, and methods it removed are
// unknown even where the tool serves them. Its tasks, which the edge does not carry to
// a server that does not list its tools per session, are the gateway's own (the tasks
// capability at 2025-11-25, the tasks extension at 2026-07-28).
func TestResultsInTheShapeOfTheirRevision(t *testing.T) {
	e := newEnv(t)
	tool := kitTool()
	tool.Capabilities = registry.Capabilities{Resources: true, Prompts: true,
		MCP: json.RawMessage(`{"prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"tasks":{"list":{}},"extensions":{"io.example/thing":{}}}`)}
	if err := e.store.PutTool(testenv.Context(t), tool); err != nil {
		t.Fatal(err)
	}
	ed := e.startEdge(t, 0, nil)
	url := e.streamableURL(ed.url)
	session := initSession(t, url)

	fields := func(x exchange) map[string]json.RawMessage {
		t.Helper()
		var m struct {
			Result map[string]json.RawMessage `json:"result"`
		}
		if x.status != 200 || json.Unmarshal(x.body, &m) != nil || m.Result == nil {
			t.Fatalf("%d %s", x.status, x.body)
		}
		return m.Result
	}
	legacy := fields(do(t, "POST", url, map[string]string{"Accept": "application/json", "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"},
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
	if _, ok := legacy["ttlMs"]; ok {
		t.Errorf("a 2025-11-25 session's tools/list carries ttlMs: %s", legacy)
	}
	if _, ok := legacy["cacheScope"]; ok {
		t.Errorf("a 2025-11-25 session's tools/list carries cacheScope: %s", legacy)
	}
	h, body := rev20260728("tools/list", "")
	h["Accept"] = "application/json"
	stateless := fields(do(t, "POST", url, h, body))
	if string(stateless["cacheScope"]) != `"private"` || string(stateless["ttlMs"]) != "0" {
		t.Errorf("a 2026-07-28 tools/list has cacheScope %s and ttlMs %s, want \"private\" and a number", stateless["cacheScope"], stateless["ttlMs"])
	}

	x := do(t, "POST", url, map[string]string{"Accept": "application/json"}, initialize)
	var init struct {
		Result struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		} `json:"result"`
	}
	if err := json.Unmarshal(x.body, &init); err != nil {
		t.Fatal(err)
	}
	caps := init.Result.Capabilities
	for name, want := range map[string]string{
		"prompts": `{"listChanged":true}`, "resources": `{"listChanged":true,"subscribe":true}`, "tasks": `{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`,
		"extensions": `{"io.example/thing":{}}`, "tools": `{"listChanged":true}`, "logging": `{}`,
	} {
		if string(caps[name]) != want {
			t.Errorf("initialize declares %s %s, want %s", name, caps[name], want)
		}
	}
	h, body = rev20260728("server/discover", "")
	discovered := fields(do(t, "POST", url, h, body))
	var discoverCaps map[string]json.RawMessage
	_ = json.Unmarshal(discovered["capabilities"], &discoverCaps)
	// Resource subscriptions and the tasks of 2025-11-25 are gone at 2026-07-28; the
	// list changes the tool declared stay (its workers tell them, wire ListChanged).
	if _, ok := discoverCaps["tasks"]; ok || string(discoverCaps["resources"]) != `{"listChanged":true}` || string(discoverCaps["prompts"]) != `{"listChanged":true}` ||
		string(discoverCaps["extensions"]) != `{"io.example/thing":{},"io.modelcontextprotocol/tasks":{}}` {
		t.Errorf("server/discover declares %s", discovered["capabilities"])
	}

	for _, method := range []string{"resources/subscribe", "resources/unsubscribe"} {
		h, body := rev20260728(method, `"uri":"test://x"`)
		h["Accept"] = "application/json"
		x := do(t, "POST", url, h, body)
		if code, _ := x.rpcError(); x.status != 404 || code != -32601 {
			t.Errorf("%s at 2026-07-28: %d %s, want 404 and -32601", method, x.status, x.body)
		}
	}
}
