package edge_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/registry"
)

// slowClient is a caller on a raw TCP connection that sends its request's body when
// and as slowly as the test says.
type slowClient struct {
	t    testing.TB
	conn net.Conn
	r    *bufio.Reader
}

// dialSlow connects to the edge and sends the headers of a tool call whose body is
// n bytes long, but none of the body.
func (e *env) dialSlow(key, tool, method string, n int) *slowClient {
	e.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /tool-call/%s/%s HTTP/1.1\r\nHost: edge\r\nSERVICE_API_KEY: %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", tool, method, key, n)
	return &slowClient{t: e.t, conn: conn, r: bufio.NewReader(conn)}
}

func (c *slowClient) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.conn, s); err != nil {
		c.t.Fatalf("sending the body: %v", err)
	}
}

// answer reads the edge's answer, within a generous deadline.
func (c *slowClient) answer() result {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		c.t.Fatalf("reading the answer: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Fatalf("reading the answer's body: %v", err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: b}
}

// closed reports whether the edge closed the connection: a read ends in EOF, or in a
// reset when the caller's own trickle reached the closed socket first. A read that
// only times out, or that finds more bytes, means the connection was left open.
func (c *slowClient) closed() bool {
	_ = c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.r.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestSlowBodies: a body must arrive within the edge's read-body timeout. A caller
// that sends its body in pieces but within the limit is served; one whose body is
// still arriving at the limit gets a 408 request_timeout, never before the limit, and
// its connection is closed, however many such callers there are. A call that takes
// longer than the limit once its body is in is not cut off.
func TestSlowBodies(t *testing.T) {
	const limit = 2 * time.Second
	e := newEnv(t, withEdge(func(c *edge.Config) { c.ReadBodyTimeout = limit }))
	key := e.account("acme", registry.Limits{})
	e.serve(echoTool, func(_ string, m *nats.Msg) {
		if strings.Contains(string(m.Data), "slow") {
			time.Sleep(2 * limit)
		}
		respond(m, 0, "application/json", m.Data)
	})
	e.connect("acme", "echo")
	const body = `{"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`

	t.Run("a body sent in pieces within the limit is served", func(t *testing.T) {
		c := e.dialSlow(key, "echo", "echo", len(body))
		c.send(body[:10])
		time.Sleep(limit / 4)
		c.send(body[10:50])
		time.Sleep(limit / 4)
		c.send(body[50:])
		r := c.answer()
		if r.status != http.StatusOK || string(r.body) != body {
			t.Fatalf("status %d, body %s; want 200 and the body echoed", r.status, r.body)
		}
	})

	t.Run("a body still arriving at the limit is a 408 and the connection is closed", func(t *testing.T) {
		const callers = 50
		start := time.Now()
		var wg sync.WaitGroup
		clients := make([]*slowClient, callers)
		for i := range clients {
			clients[i] = e.dialSlow(key, "echo", "echo", len(body))
			clients[i].send(body[:1])
		}
		// Each trickles a byte every tenth of the limit, so it never sends its whole body.
		stop := make(chan struct{})
		for _, c := range clients {
			wg.Go(func() {
				for i := 1; i < len(body)-1; i++ {
					select {
					case <-stop:
						return
					case <-time.After(limit / 10):
					}
					if _, err := io.WriteString(c.conn, body[i:i+1]); err != nil {
						return // closed by the edge
					}
				}
			})
		}
		defer func() { close(stop); wg.Wait() }()
		for i, c := range clients {
			r := c.answer()
			if took := time.Since(start); took < limit {
				t.Fatalf("caller %d answered after %v, before the limit %v", i, took, limit)
			}
			got := r.expect(t, http.StatusRequestTimeout, edge.CodeRequestTimeout)
			if got.Message == "" {
				t.Fatalf("caller %d: an envelope without a message", i)
			}
			if !c.closed() {
				t.Fatalf("caller %d: the connection was left open after the 408", i)
			}
		}
	})

	t.Run("a call that outlasts the limit once its body is in is answered", func(t *testing.T) {
		slow := `{"slow":true}`
		c := e.dialSlow(key, "echo", "echo", len(slow))
		c.send(slow)
		r := c.answer()
		if r.status != http.StatusOK || string(r.body) != slow {
			t.Fatalf("status %d, body %s; want 200 and the body echoed", r.status, r.body)
		}
	})
}
