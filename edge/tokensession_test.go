package edge_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestATokensSessionEndsWithItsGrant: an MCP session opened with an access token
// belongs to the token's grant. A token of another grant of the same account does not
// reach it (404); revoked on edge a's keys page, the grant's session ends on edge b:
// its open GET stream closes, and the session is gone.
func TestATokensSessionEndsWithItsGrant(t *testing.T) {
	a := newEnv(t, withMCP(), withDashboard(), withSignIn())
	b := newEnv(t, withMCP(), withSignIn(), onServer(a.srv.ClientURL()), asEdgeOf(a.url))
	key := a.account("acme", registry.Limits{Sessions: 100})
	a.serve(registry.Tool{ID: "kit", Title: "Kit", Methods: []registry.Method{{Name: "echo"}}}, func(method string, m *nats.Msg) { echo(method, m) })
	a.connect("acme", "kit")
	testenv.WaitFor(t, "b's view has acme", func() bool { return b.view.Snapshot().Account("acme") != nil })

	tok, _ := toolToken(t, a, key, "kit")
	other, _ := toolToken(t, a, key, "kit")
	endpoint := b.url + "/tools/kit/mcp"
	session, closed := openSessionStream(t, endpoint, tok.AccessToken)
	others := map[string]string{"Authorization": "Bearer " + other.AccessToken, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
	if r, _ := mcpPost(t, endpoint, others, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); r.StatusCode != http.StatusNotFound {
		t.Fatalf("another grant's token on the session: %d, want 404", r.StatusCode)
	}

	grants, err := a.authServer.Grants(testenv.Context(t), "acme")
	if err != nil || len(grants) != 2 {
		t.Fatalf("grants %+v %v", grants, err)
	}
	first := grants[0] // tok's grant: it was signed in before the other's
	if grants[1].CreatedAt.Before(first.CreatedAt) {
		first = grants[1]
	}
	revokeOnKeysPage(t, a, key, first.ID)
	select {
	case <-closed:
	case <-time.After(testenv.Patience):
		t.Fatal("the session's stream is still open after its grant was revoked")
	}
	// The other grant's session is untouched: its token still opens one.
	if r, _ := mcpPost(t, endpoint, map[string]string{"Authorization": "Bearer " + other.AccessToken}, initialize); r.StatusCode != http.StatusOK {
		t.Fatalf("the other grant's token after the revocation: %d", r.StatusCode)
	}
}

// openSessionStream opens an MCP session at endpoint with the access token, and its
// GET stream; closed is closed when the stream ends.
func openSessionStream(t *testing.T, endpoint, token string) (session string, closed <-chan struct{}) {
	t.Helper()
	resp, _ := mcpPost(t, endpoint, map[string]string{"Authorization": "Bearer " + token}, initialize)
	session = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize with the token: %d, session %q", resp.StatusCode, session)
	}
	own := map[string]string{"Authorization": "Bearer " + token, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
	if r, _ := mcpPost(t, endpoint, own, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d", r.StatusCode)
	}
	req, err := http.NewRequest(http.MethodGet, endpoint, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range own {
		req.Header.Set(k, v)
	}
	req.Header.Set("Accept", "text/event-stream")
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stream.Body.Close() })
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("the session's GET stream: %d", stream.StatusCode)
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stream.Body)
		close(done)
	}()
	return session, done
}
