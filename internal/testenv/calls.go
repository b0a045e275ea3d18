package testenv

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
)

// CallRecorder is an http.RoundTripper for an MCP client's HTTP client: it keeps, of
// every tools/call the client POSTs, the answer's content type and body as the client
// read it, and passes everything on unchanged.
type CallRecorder struct {
	Base http.RoundTripper // http.DefaultTransport when nil
	mu   sync.Mutex
	seen []*CallAnswer
}

// CallAnswer is the HTTP answer to one tools/call.
type CallAnswer struct {
	ContentType string // without parameters
	mu          sync.Mutex
	read        bytes.Buffer
}

// Body is what the client read of the answer so far.
func (a *CallAnswer) Body() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.read.String()
}

func (c *CallRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	base := c.Base
	if base == nil {
		base = http.DefaultTransport
	}
	var sent []byte
	if req.Method == http.MethodPost && req.Body != nil {
		var err error
		if sent, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(sent))
	}
	resp, err := base.RoundTrip(req)
	if err != nil || !bytes.Contains(sent, []byte(`"method":"tools/call"`)) {
		return resp, err
	}
	ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	a := &CallAnswer{ContentType: ct}
	c.mu.Lock()
	c.seen = append(c.seen, a)
	c.mu.Unlock()
	resp.Body = &recordedBody{ReadCloser: resp.Body, a: a}
	return resp, nil
}

// Last is the answer to the latest tools/call.
func (c *CallRecorder) Last(t testing.TB) *CallAnswer {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) == 0 {
		t.Fatal("no tools/call was sent")
	}
	return c.seen[len(c.seen)-1]
}

type recordedBody struct {
	io.ReadCloser
	a *CallAnswer
}

func (r *recordedBody) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	r.a.mu.Lock()
	r.a.read.Write(b[:n])
	r.a.mu.Unlock()
	return n, err
}

// ToolText is the text of a tool's result: its text contents, one after the other.
func ToolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// PostRecords counts the records the MCP event log (the stream tg-mcp-events) keeps
// of the POST streams of a session of tool: what its calls answered on a stream left.
func PostRecords(t testing.TB, nc *nats.Conn, tool, session string) uint64 {
	t.Helper()
	ctx := Context(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "tg-mcp-events")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(wire.DefaultSubjects.SessionPost(tool, session, "*")))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}
