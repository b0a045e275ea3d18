package edge_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// trickle opens a connection to the edge and sends the headers of a POST to path (or
// of another method, when path begins with it: "PUT /x") that declares a body of
// declared bytes, and the first bytes of it, but nothing more. Its Content-Type is JSON
// unless headers (name, value pairs) name another.
func (e *env) trickle(path string, declared int, first string, headers ...string) net.Conn {
	e.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() })
	var b strings.Builder
	method := http.MethodPost
	if m, p, ok := strings.Cut(path, " "); ok {
		method, path = m, p
	}
	// The edge's own address: MCP routes on a loopback listener take no other host.
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", method, path, strings.TrimPrefix(e.url, "http://"), declared)
	typed := false
	for i := 0; i+1 < len(headers); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", headers[i], headers[i+1])
		typed = typed || http.CanonicalHeaderKey(headers[i]) == "Content-Type"
	}
	if !typed {
		b.WriteString("Content-Type: application/json\r\n")
	}
	b.WriteString("\r\n" + first)
	if _, err := io.WriteString(conn, b.String()); err != nil {
		e.t.Fatal(err)
	}
	return conn
}

// heapInUse is the live heap and the goroutine stacks, once garbage is collected.
func heapInUse() (heap, stack uint64) {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapInuse, m.StackInuse
}

// goroutinesIn counts the goroutines whose stack passes through fn.
func goroutinesIn(fn string) int {
	buf := make([]byte, 8<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), fn+"(")
}

// TestDeclaredBodiesCostOnlyWhatArrives: a thousand callers who declare a body of a
// megabyte, or of the 64 MiB a call's body may have (past one message, such a body
// goes to the payloads bucket as it arrives), and send a few bytes of it cost the edge
// what arrived and a bounded step more, not what they declared: no buffer, and no
// write to the payloads bucket, is begun ahead of the bytes.
func TestDeclaredBodiesCostOnlyWhatArrives(t *testing.T) {
	const (
		callers = 1000
		perConn = 64 << 10 // the bound each such caller may cost the edge's heap and stacks
	)
	e := newEnv(t, withEdge(func(c *edge.Config) { c.ReadBodyTimeout = 10 * time.Minute }))
	key := e.account("acme", registry.Limits{})
	e.serve(echoTool, echo)
	e.connect("acme", "echo")
	// A call first, so that what the edge makes once is made before the measure.
	if r := e.call(key, "echo", "echo", `{"warm":true}`); r.status != http.StatusOK {
		t.Fatalf("warm-up call: status %d, body %s", r.status, r.body)
	}
	e.client.CloseIdleConnections()

	for _, declared := range []int{1_000_000, int(edge.DefaultMaxPayloadBytes)} {
		boundTricklers(t, callers, declared, perConn, "github.com/toolgate/toolgate/edge.readBodyUpTo", func() net.Conn {
			return e.trickle("/tool-call/echo/echo", declared, `{"pad":"xxxxxx`, "SERVICE_API_KEY", key)
		})
	}
}

// boundTricklers opens callers connections with open, each declaring a body of
// declared bytes and sending its first few, and fails the test when each grew the
// edge's heap and goroutine stacks by more than perConn once all of them are being
// read (a goroutine in reader), or when a payload is being written for any.
func boundTricklers(t *testing.T, callers, declared int, perConn int64, reader string, open func() net.Conn) {
	t.Helper()
	heap0, stack0 := heapInUse()
	conns := make([]net.Conn, callers)
	for i := range conns {
		conns[i] = open()
	}
	testenv.WaitFor(t, "every caller's body is being read", func() bool {
		return goroutinesIn(reader) == callers
	})
	heap1, stack1 := heapInUse()
	heapEach := (int64(heap1) - int64(heap0)) / int64(callers)
	stackEach := (int64(stack1) - int64(stack0)) / int64(callers)
	t.Logf("%d callers declaring %d bytes and sending a few: heap %+d bytes each, goroutine stacks %+d bytes each",
		callers, declared, heapEach, stackEach)
	if heapEach+stackEach > perConn {
		t.Fatalf("declaring %d bytes, each caller grew the edge's heap by %d bytes and its stacks by %d, want at most %d in all",
			declared, heapEach, stackEach, perConn)
	}
	if writes := goroutinesIn("github.com/toolgate/toolgate/payloads.(*Store).Write"); writes != 0 {
		t.Fatalf("declaring %d bytes, %d callers have a payload being written before their bytes came", declared, writes)
	}
	for _, c := range conns {
		c.Close()
	}
	testenv.WaitFor(t, "the callers are gone", func() bool {
		return goroutinesIn(reader) == 0
	})
}

// TestRefusedBeforeTheBody: a request refused before its body is read (its key, link or
// sign-in form fails) is answered at once and its connection closed, without waiting
// for the body it declared, on every route that takes a body, whatever length up to
// the route's limit it declares. The authorization server's routes read their form to
// authenticate the client (or, registering one, take anyone's): their bodies are held
// to the edge's small body limit, and one declared past it is refused at once so. A
// request whose body was read keeps its connection.
func TestRefusedBeforeTheBody(t *testing.T) {
	e := newEnv(t, withMCP(), withDashboard(), withSignIn(), withEdge(func(c *edge.Config) { c.ReadBodyTimeout = 10 * time.Minute }))
	key := e.account("acme", registry.Limits{})
	e.serve(echoTool, echo)
	e.connect("acme", "echo")
	const badKey = "tg_not-a-key"
	small := []int{1_000, 1_000_000}
	payload := []int{1_000, 1_000_000, int(edge.DefaultMaxPayloadBytes)} // a call's body, up to the payload limit
	pastSmall := []int{int(edge.DefaultMaxBodyBytes) + 1, 50_000_000}
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	routes := []struct {
		name     string
		path     string
		status   int
		declared []int
		headers  []string
	}{
		{"a tool call with a bad key", "/tool-call/echo/echo", http.StatusUnauthorized, payload, []string{"SERVICE_API_KEY", badKey}},
		{"a tool call with no key", "/tool-call/echo/echo", http.StatusUnauthorized, payload, nil},
		{"the direct API with a bad key", "/tools/echo/echo", http.StatusUnauthorized, payload, []string{"Authorization", "Bearer " + badKey}},
		{"MCP with a bad key", "/tools/echo/mcp", http.StatusUnauthorized, payload, []string{"SERVICE_API_KEY", badKey}},
		{"legacy MCP messages with a bad key", "/tools/echo/sse/messages?sessionId=x", http.StatusUnauthorized, payload, []string{"SERVICE_API_KEY", badKey}},
		{"MCP through an unknown link", "/mcp/tgl_unknown", http.StatusNotFound, payload, nil},
		{"legacy MCP messages through an unknown link", "/mcp/tgl_unknown/messages?sessionId=x", http.StatusNotFound, payload, nil},
		{"the admin API with a bad key", "/admin/accounts", http.StatusUnauthorized, small, []string{"Authorization", "Bearer " + badKey}},
		{"an approval's decision with a bad key", "/admin/approvals/apr_x", http.StatusUnauthorized, small, []string{"Authorization", "Bearer " + badKey}},
		{"a connection's credentials with a bad key", "PUT /admin/connections/acme/echo/credentials", http.StatusUnauthorized, small, []string{"Authorization", "Bearer " + badKey}},
		{"a connection's credentials patched with a bad key", "PATCH /admin/connections/acme/echo/credentials", http.StatusUnauthorized, small, []string{"Authorization", "Bearer " + badKey}},
		{"a dashboard sign-in without its form's cookie", "/dashboard/signin", http.StatusForbidden, small, form},
		{"a dashboard form without a session", "/dashboard/keys", http.StatusSeeOther, small, form},
		{"a consent's answer without a session", "/dashboard/oauth/consent", http.StatusSeeOther, small, form},
		{"a token request past the small limit", "/oauth/token", http.StatusRequestEntityTooLarge, pastSmall, form},
		{"a revocation past the small limit", "/revoke", http.StatusRequestEntityTooLarge, pastSmall, form},
		{"a client's registration past the small limit", "/oauth/register", http.StatusRequestEntityTooLarge, pastSmall, nil},
		{"a tool call past the payload limit", "/tool-call/echo/echo", http.StatusRequestEntityTooLarge, []int{int(edge.DefaultMaxPayloadBytes) + 1}, []string{"SERVICE_API_KEY", key}},
	}
	for _, rt := range routes {
		for _, declared := range rt.declared {
			t.Run(fmt.Sprintf("%s, declaring %d bytes", rt.name, declared), func(t *testing.T) {
				const callers = 10
				var wg sync.WaitGroup
				errs := make(chan error, callers)
				for range callers {
					conn := e.trickle(rt.path, declared, "key=tg_xxxxxxx", rt.headers...)
					wg.Go(func() { errs <- answeredAndClosed(conn, rt.status) })
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}

	t.Run("requests whose bodies were read keep their connection", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		for _, req := range []struct{ path, body, auth string }{
			{"/tool-call/echo/echo", `{"a":1}`, "SERVICE_API_KEY: " + key},
			{"/admin/accounts", `{"id":"beta"}`, "Authorization: Bearer " + e.adminKey},
			{"/tool-call/echo/echo", `{"a":2}`, "SERVICE_API_KEY: " + key},
		} {
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: edge\r\n%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				req.path, req.auth, len(req.body), req.body)
			_ = conn.SetReadDeadline(time.Now().Add(testenv.Patience))
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatalf("%s: %v", req.path, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode >= 300 || resp.Close {
				t.Fatalf("%s: status %d, close %v: want a success on a connection kept open", req.path, resp.StatusCode, resp.Close)
			}
		}
	})
}

// answeredAndClosed reads the edge's answer on conn, which has sent only part of its
// body, and then the end of the connection. The wait is generous (the edge's body
// timeout is minutes away, so only the edge's closing it can end it in time).
func answeredAndClosed(conn net.Conn, status int) error {
	_ = conn.SetReadDeadline(time.Now().Add(testenv.Patience))
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return fmt.Errorf("no answer before the body: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != status {
		return fmt.Errorf("status %d, want %d", resp.StatusCode, status)
	}
	if !resp.Close {
		return errors.New("the answer does not say Connection: close")
	}
	_, err = r.ReadByte()
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("the connection was left open after the answer (%v)", err)
	}
	return nil
}
