package connect_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/internal/testenv"
)

// The link's secret, which must never show in output.
const secret = "lnk_s3cretT0ken"

type sendIn struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

type sendOut struct {
	Status string `json:"status"`
}

type confirmOut struct {
	Answer string `json:"answer"`
}

// newEmailServer is an MCP server with the email tool, and a tool that asks the
// user through elicitation before it answers.
func newEmailServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "email", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "send_email", Description: "Send an email"},
		func(ctx context.Context, req *mcp.CallToolRequest, in sendIn) (*mcp.CallToolResult, sendOut, error) {
			return nil, sendOut{Status: "sent to " + in.To}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "confirm_send", Description: "Ask before sending"},
		func(ctx context.Context, req *mcp.CallToolRequest, in sendIn) (*mcp.CallToolResult, confirmOut, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
				Message: "Send " + in.Subject + "?",
				RequestedSchema: map[string]any{
					"type":       "object",
					"properties": map[string]any{"ok": map[string]any{"type": "boolean"}},
				},
			})
			if err != nil {
				return nil, confirmOut{}, err
			}
			return nil, confirmOut{Answer: fmt.Sprintf("%s %v", res.Action, res.Content["ok"])}, nil
		})
	return s
}

// gateway serves handler at path on 127.0.0.1 and returns the server's URL.
func gateway(t *testing.T, path string, handler http.Handler) (string, *atomic.Value) {
	t.Helper()
	var team atomic.Value
	team.Store("")
	mux := http.NewServeMux()
	mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("X-Team"); v != "" {
			team.Store(v)
		}
		handler.ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, &team
}

// relayed is a client session through connect.Run, which runs in the test's process
// on pipes, as `toolgate connect` runs on its stdin and stdout.
type relayed struct {
	*mcp.ClientSession
	done chan error
}

// Close closes the client's side, as a client closes the relay's input, and returns
// what Run returned then.
func (r *relayed) Close() error {
	_ = r.ClientSession.Close()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(testenv.Patience):
		return fmt.Errorf("Run did not return within %v of the client closing its input", testenv.Patience)
	}
}

// session runs the relay to link with header and connects a client to it the way an
// MCP client connects to `toolgate connect`; it returns the session and the relay's
// log (what the command writes on stderr).
func session(t *testing.T, opts *mcp.ClientOptions, version, link string, header http.Header) (*relayed, *testenv.Buffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	t.Cleanup(cancel)
	logs := &testenv.Buffer{}
	clientIn, relayOut := io.Pipe()
	relayIn, clientOut := io.Pipe()
	r := &relayed{done: make(chan error, 1)}
	go func() {
		err := connect.Run(context.Background(), &mcp.IOTransport{Reader: relayIn, Writer: relayOut}, connect.Config{
			Link: link, Header: header, Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		})
		relayOut.Close() // as the process's stdout closes when it exits
		r.done <- err
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1.0.0"}, opts)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting through the relay: %v\nlog:\n%s", err, logs)
	}
	r.ClientSession = cs
	t.Cleanup(func() { _ = r.Close() })
	return r, logs
}

func callSend(t *testing.T, cs *relayed) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "send_email",
		Arguments: map[string]any{"to": "ada@example.com", "subject": "hi"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("tool failed: %+v", res)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// protocols are the revisions a client may speak: the SDK's default tries the
// stateless 2026-07-28 first; older clients initialize a session.
var protocols = []struct{ version, says string }{
	{"", "the SDK's default protocol"},
	{"2025-11-25", "protocol 2025-11-25"},
	{"2025-06-18", "protocol 2025-06-18"},
	{"2025-03-26", "protocol 2025-03-26"},
}

func TestAClientCallsAToolThroughConnectOverStreamableHTTP(t *testing.T) {
	for _, p := range protocols {
		t.Run("with "+p.says+", calls, notifications and elicitation pass both ways", func(t *testing.T) {
			server := newEmailServer()
			base, team := gateway(t, "/mcp/"+secret, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))

			changed := make(chan struct{}, 1)
			cs, stderr := session(t, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
					select {
					case changed <- struct{}{}:
					default:
					}
				},
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
				},
			}, p.version, base+"/mcp/"+secret, http.Header{"X-Team": {"growth"}})

			if got := callSend(t, cs); !strings.Contains(got, "sent to ada@example.com") {
				t.Errorf("tool answered %q", got)
			}
			if got := team.Load(); got != "growth" {
				t.Errorf("the link got X-Team %q, want growth", got)
			}

			ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "confirm_send", Arguments: map[string]any{"to": "ada@example.com", "subject": "the report"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(got, "accept true") {
				t.Errorf("the server's elicitation did not reach the client and back: %q", got)
			}

			mcp.AddTool(server, &mcp.Tool{Name: "read_inbox"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, sendOut, error) {
				return nil, sendOut{}, nil
			})
			select {
			case <-changed:
			case <-ctx.Done():
				t.Error("notifications/tools/list_changed did not reach the client")
			}

			if err := cs.Close(); err != nil {
				t.Errorf("the relay did not end cleanly when its input closed: %v\nlog:\n%s", err, stderr)
			}
			if strings.Contains(stderr.String(), secret) {
				t.Errorf("stderr shows the link's secret:\n%s", stderr)
			}
		})
	}
}

func TestConnectFallsBackToLegacySSE(t *testing.T) {
	for _, tc := range []struct {
		name string
		path string
	}{
		{"an SSE-only server at the link itself", "/mcp/" + secret},
		{"an SSE-only server at the link's /sse, as the edge serves it", "/mcp/" + secret + "/sse"},
	} {
		t.Run(tc.name+" is reached over legacy SSE", func(t *testing.T) {
			server := newEmailServer()
			base, _ := gateway(t, tc.path, mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return server }, nil))

			cs, stderr := session(t, nil, "", base+"/mcp/"+secret, nil)
			if got := callSend(t, cs); !strings.Contains(got, "sent to ada@example.com") {
				t.Errorf("tool answered %q", got)
			}
			if err := cs.Close(); err != nil {
				t.Errorf("the relay did not end cleanly: %v\nlog:\n%s", err, stderr)
			}
			if !strings.Contains(stderr.String(), "legacy SSE") {
				t.Errorf("stderr does not say it fell back:\n%s", stderr)
			}
			if strings.Contains(stderr.String(), secret) {
				t.Errorf("stderr shows the link's secret:\n%s", stderr)
			}
		})
	}
}

func TestConnectReportsAFailedLinkWithoutShowingIt(t *testing.T) {
	var gets atomic.Int32
	refusing, _ := gateway(t, "/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
		}
		http.Error(w, "unauthenticated", http.StatusUnauthorized)
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()

	for _, tc := range []struct{ name, link, want string }{
		{"an unreachable link", closed + "/mcp/" + secret, "connection refused"},
		{"a link that refuses the caller (401) is not taken for an SSE server", refusing + "/mcp/" + secret, "Unauthorized"},
	} {
		t.Run(tc.name+" fails the client's first call and ends the relay with an error", func(t *testing.T) {
			var stdout, stderr testenv.Buffer
			in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"
			err := connect.Run(testenv.Context(t), &mcp.IOTransport{Reader: io.NopCloser(strings.NewReader(in)), Writer: nopCloser{&stdout}},
				connect.Config{Link: tc.link, Logger: slog.New(slog.NewJSONHandler(&stderr, nil))})
			if err == nil {
				t.Fatal("Run returned no error: toolgate connect would exit 0")
			}
			if !strings.Contains(stdout.String(), `"id":1`) || !strings.Contains(stdout.String(), `"error"`) {
				t.Errorf("the client's call got no error answer: %s", &stdout)
			}
			if said := stderr.String() + err.Error(); !strings.Contains(said, tc.want) {
				t.Errorf("neither the log nor the error says %q:\n%s", tc.want, said)
			}
			if out := stdout.String() + stderr.String() + err.Error(); strings.Contains(out, secret) {
				t.Errorf("output shows the link's secret:\n%s", out)
			}
		})
	}
	if n := gets.Load(); n != 0 {
		t.Errorf("a link that refused the caller was tried over SSE (%d GETs)", n)
	}
}

func TestRunExitsCleanlyWhenTheClientClosesItsInput(t *testing.T) {
	server := newEmailServer()
	base, _ := gateway(t, "/mcp/"+secret, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	cs, logs := session(t, nil, "2025-11-25", base+"/mcp/"+secret, nil)
	if got := callSend(t, cs); !strings.Contains(got, "sent to") {
		t.Errorf("tool answered %q", got)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("Run: %v\nlog:\n%s", err, logs)
	}
}

// nopCloser is a writer the relay may close.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func TestConfigRefusesALinkThatIsNotAnHTTPURL(t *testing.T) {
	for _, link := range []string{"", "mcp/lnk", "ftp://host/mcp/lnk", "http:///mcp"} {
		t.Run(fmt.Sprintf("%q is refused", link), func(t *testing.T) {
			err := connect.Config{Link: link}.Validate()
			if err == nil || !strings.Contains(err.Error(), "link") {
				t.Errorf("error %v does not name the link", err)
			}
		})
	}
}

// recorder wraps an endpoint and notes what it was sent: the methods POSTed, with
// their Mcp-Method and Mcp-Name headers. refuse names a method the endpoint answers
// with a bare HTTP 400, as a proxy or an older server would.
type recorder struct {
	next   http.Handler
	refuse string
	mu     sync.Mutex
	posts  []string // "method|Mcp-Method|Mcp-Name"
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		rec.mu.Lock()
		rec.posts = append(rec.posts, m.Method+"|"+r.Header.Get("Mcp-Method")+"|"+r.Header.Get("Mcp-Name"))
		rec.mu.Unlock()
		if m.Method != "" && m.Method == rec.refuse {
			http.Error(w, "not here", http.StatusBadRequest)
			return
		}
	}
	rec.next.ServeHTTP(w, r)
}

func (rec *recorder) sent() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.posts)
}

func TestConnectLivesOnWhenTheLinkRefusesAMessage(t *testing.T) {
	for _, p := range protocols {
		t.Run("with "+p.says+", a refused request fails alone", func(t *testing.T) {
			server := newEmailServer()
			rec := &recorder{next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil), refuse: "tools/list"}
			base, _ := gateway(t, "/mcp/"+secret, rec)
			cs, stderr := session(t, nil, p.version, base+"/mcp/"+secret, nil)
			defer cs.Close()

			ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
			defer cancel()
			if _, err := cs.ListTools(ctx, nil); err == nil {
				t.Fatal("tools/list, which the link refused, succeeded")
			}
			if got := callSend(t, cs); !strings.Contains(got, "sent to ada@example.com") {
				t.Errorf("after a refused request the tool answered %q\nstderr:\n%s", got, stderr)
			}
		})
	}
}

func TestConnectCancelsAStatelessCallByClosingItsRequest(t *testing.T) {
	server := newEmailServer()
	cancelled := make(chan struct{}, 1)
	started := make(chan struct{}, 1)
	mcp.AddTool(server, &mcp.Tool{Name: "wait", Description: "Waits until cancelled"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, sendOut, error) {
			started <- struct{}{}
			<-ctx.Done()
			cancelled <- struct{}{}
			return nil, sendOut{}, ctx.Err()
		})
	rec := &recorder{next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})}
	base, _ := gateway(t, "/mcp/"+secret, rec)
	cs, stderr := session(t, nil, "2026-07-28", base+"/mcp/"+secret, nil)
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("the client speaks %s", v)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{}})
		done <- err
	}()
	select {
	case <-started:
	case <-time.After(testenv.Patience):
		t.Fatalf("the call never reached the server\nstderr:\n%s", stderr)
	}
	cancel()
	select {
	case <-cancelled:
	case <-time.After(testenv.Patience):
		t.Fatalf("the server's handler was never cancelled; the link was sent %q\nstderr:\n%s", rec.sent(), stderr)
	}
	<-done
	if got := callSend(t, cs); !strings.Contains(got, "sent to ada@example.com") {
		t.Errorf("after a cancelled call the tool answered %q\nstderr:\n%s", got, stderr)
	}
	for _, p := range rec.sent() {
		method, headers, _ := strings.Cut(p, "|")
		if method == "notifications/cancelled" {
			t.Errorf("notifications/cancelled was POSTed to a 2026-07-28 link")
		}
		if method == "tools/call" && headers != "tools/call|send_email" && headers != "tools/call|wait" {
			t.Errorf("tools/call was POSTed with Mcp-Method|Mcp-Name %q", headers)
		}
	}
}
