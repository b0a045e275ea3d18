package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
)

// mcpClient speaks Streamable HTTP to an edge's MCP routes as a client would, one
// request at a time, with either an API key or a link.
type mcpClient struct {
	t   *testing.T
	key string // sent as SERVICE_API_KEY when set
}

// request POSTs one JSON-RPC message to url, in session (if any), and returns the
// status and the session id the edge answered with.
func (c mcpClient) request(url, session, body string) (int, string) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.key != "" {
		req.Header.Set("SERVICE_API_KEY", c.key)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

// open initializes a session at url and returns its id.
func (c mcpClient) open(url string) string {
	c.t.Helper()
	status, session := c.request(url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
	if status != http.StatusOK || session == "" {
		c.t.Fatalf("initialize at %s: status %d, session %q", url, status, session)
	}
	if status, _ := c.request(url, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != http.StatusAccepted {
		c.t.Fatalf("notifications/initialized: status %d", status)
	}
	return session
}

// listTools asks for the tools in session and returns the status.
func (c mcpClient) listTools(url, session string) int {
	c.t.Helper()
	status, _ := c.request(url, session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	return status
}

// stream opens the session's GET stream at url and returns a channel that is closed
// when the edge ends it.
func (c mcpClient) stream(url, session string) <-chan struct{} {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	if c.key != "" {
		req.Header.Set("SERVICE_API_KEY", c.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		c.t.Fatalf("GET stream: status %d", resp.StatusCode)
	}
	// The stream is open once its first event (the priming one) is in.
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil {
		c.t.Fatalf("GET stream: %v", err)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, r)
	}()
	return ended
}

func waitEnded(t *testing.T, ended <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ended:
	case <-time.After(testenv.Patience):
		t.Fatalf("%s: the stream was still open after %v", what, testenv.Patience)
	}
}

// onEdge is url moved to the edge at base.
func onEdge(t *testing.T, url, base string) string {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	return base + u.Path
}

// knowKey waits until every edge takes key and shows the echo tool online with it.
func knowKey(t *testing.T, key string, edges ...string) {
	t.Helper()
	testenv.WaitFor(t, "every edge knows the key and the echo tool is online", func() bool {
		for _, base := range edges {
			if status, body := call(t, http.MethodGet, base+"/tools/echo", key, ""); status != http.StatusOK || !strings.Contains(body, `"online"`) {
				return false
			}
		}
		return true
	})
}

// TestSessionsEndWithTheirCredential: an MCP session belongs to the key or link that
// opened it. Revoking the key, rotating the link, or deleting the account ends the
// session on every edge (a stream another edge holds closes), and nothing else opens
// it: not another key of the account, not the new link, not the keys of an account
// created again under the same id.
func TestSessionsEndWithTheirCredential(t *testing.T) {
	srv := testenv.Server(t)
	sec := newDeploymentSecrets(t)
	a := startDeploymentEdge(t, srv.ClientURL(), sec)
	b := startDeploymentEdge(t, srv.ClientURL(), sec)
	startWorkerDemo(t, srv.ClientURL())

	newKey := func(account string) edge.NewKey {
		t.Helper()
		var key edge.NewKey
		if err := json.Unmarshal([]byte(admin(t, a, "keys", "create", account)), &key); err != nil {
			t.Fatal(err)
		}
		return key
	}
	connect := func(account string) edge.Connection {
		t.Helper()
		var conn edge.Connection
		if err := json.Unmarshal([]byte(admin(t, a, "tools", "connect", account, "echo")), &conn); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	admin(t, a, "accounts", "create", "acme")
	conn := connect("acme")
	key, other := newKey("acme").Secret, newKey("acme").Secret
	byKey := "/tools/echo/mcp"
	knowKey(t, key, a, b)
	knowKey(t, other, a, b)

	t.Run("another key of the account does not open a session", func(t *testing.T) {
		session := mcpClient{t, key}.open(a + byKey)
		if status := (mcpClient{t, key}).listTools(b+byKey, session); status != http.StatusOK {
			t.Fatalf("the session's own key on another edge: status %d", status)
		}
		if status := (mcpClient{t, other}).listTools(b+byKey, session); status != http.StatusNotFound {
			t.Fatalf("another key of the account: status %d, want 404", status)
		}
	})

	t.Run("revoking a key ends its sessions on every edge", func(t *testing.T) {
		revoked := newKey("acme")
		knowKey(t, revoked.Secret, a, b)
		client := mcpClient{t, revoked.Secret}
		session := client.open(a + byKey)
		ended := client.stream(b+byKey, session)
		admin(t, a, "keys", "revoke", revoked.ID)
		waitEnded(t, ended, "the revoked key's stream on edge b")
		if status := (mcpClient{t, other}).listTools(a+byKey, session); status != http.StatusNotFound {
			t.Fatalf("the ended session with another key: status %d, want 404", status)
		}
	})

	t.Run("rotating a link ends the sessions it opened on every edge", func(t *testing.T) {
		client := mcpClient{t: t}
		session := client.open(conn.MCPURL)
		ended := client.stream(onEdge(t, conn.MCPURL, b), session)
		var rotated edge.Connection
		if err := json.Unmarshal([]byte(admin(t, a, "links", "rotate", "acme", "echo")), &rotated); err != nil {
			t.Fatal(err)
		}
		waitEnded(t, ended, "the old link's stream on edge b")
		testenv.WaitFor(t, "edge b knows the new link", func() bool {
			status, _ := client.request(onEdge(t, rotated.MCPURL, b), "", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
			return status != http.StatusNotFound
		})
		if status := client.listTools(onEdge(t, rotated.MCPURL, b), session); status != http.StatusNotFound {
			t.Fatalf("the old link's session through the new link: status %d, want 404", status)
		}
	})

	t.Run("an account deleted and created again does not get the old account's sessions", func(t *testing.T) {
		client := mcpClient{t, other}
		session := client.open(a + byKey)
		ended := client.stream(b+byKey, session)
		admin(t, a, "accounts", "delete", "acme")
		waitEnded(t, ended, "the deleted account's stream on edge b")

		admin(t, a, "accounts", "create", "acme")
		connect("acme")
		again := newKey("acme").Secret
		knowKey(t, again, a, b)
		for _, base := range []string{a, b} {
			if status := (mcpClient{t, again}).listTools(base+byKey, session); status != http.StatusNotFound {
				t.Fatalf("the old account's session with the new account's key on %s: status %d, want 404", base, status)
			}
		}
	})
}
