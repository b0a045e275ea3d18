package edge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

// bearerTransport sends every request with an access token, as an MCP client that
// signed in does.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// goSDKSession connects the go-sdk's MCP client to url with token.
func goSDKSession(t *testing.T, url, token string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "signin-test", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{token}}}
	cs, err := c.Connect(testenv.Context(t), tr, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// challenge reads a 401 or 403's WWW-Authenticate: its parameters by name.
func challenge(t *testing.T, resp *http.Response) map[string]string {
	t.Helper()
	h := resp.Header.Get("WWW-Authenticate")
	scheme, rest, _ := strings.Cut(h, " ")
	if scheme != "Bearer" {
		t.Fatalf("WWW-Authenticate %q: want a Bearer challenge", h)
	}
	params := map[string]string{}
	for _, p := range strings.Split(rest, ", ") {
		k, v, _ := strings.Cut(p, "=")
		params[k] = strings.Trim(v, `"`)
	}
	return params
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// TestLinksRequireSignIn: the link of an account that requires sign-in answers a
// bare request 401 naming its own metadata, which names the link and the issuer; it
// takes an access token issued for it (a real MCP client lists and calls with one),
// and an API key of the account, and refuses a token for another link, an expired
// one, and one whose scope lacks the call (403 naming the scope). A link of an
// account that does not require sign-in works bare, as before.
func TestLinksRequireSignIn(t *testing.T) {
	e := newEnv(t, withMCP(), withSignIn())
	key := e.account("acme", registry.Limits{})
	e.account("open", registry.Limits{})
	kit := registry.Tool{ID: "kit", Title: "Kit", Methods: []registry.Method{{Name: "echo"}}}
	e.serve(kit, func(method string, m *nats.Msg) { echo(method, m) })
	e.deploy(registry.Tool{ID: "other", Title: "Other", Methods: []registry.Method{{Name: "nap"}}})
	link := e.url + "/mcp/" + e.signer.Token("acme", "kit", e.connect("acme", "kit").LinkNonce)
	otherLink := e.url + "/mcp/" + e.signer.Token("acme", "other", e.connect("acme", "other").LinkNonce)
	openLink := e.url + "/mcp/" + e.signer.Token("open", "kit", e.connect("open", "kit").LinkNonce)

	e.do(http.MethodPatch, "/admin/accounts/acme", `{"require_sign_in":true}`, "Authorization", "Bearer "+e.adminKey).expectOK(t)
	testenv.WaitFor(t, "the edge sees acme require sign-in", func() bool { return e.view.Snapshot().Account("acme").RequireSignIn })

	// No token: 401, and the challenge's metadata names this link and the issuer.
	resp, _ := mcpPost(t, link, nil, initialize)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("bare link: status %d, want 401", resp.StatusCode)
	}
	ch := challenge(t, resp)
	if want, _ := oauth.MetadataURL(link); ch["resource_metadata"] != want || ch["scope"] != "kit:list kit:call" {
		t.Fatalf("challenge %v: want resource_metadata %s and the tool's scopes", ch, want)
	}
	var meta oauth.ResourceMetadata
	getJSON(t, ch["resource_metadata"], &meta)
	if meta.Resource != link || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != e.url {
		t.Fatalf("metadata %+v: want resource %s and issuer %s", meta, link, e.url)
	}

	mint := func(resource string, scopes []string, issued time.Time, ttl time.Duration) string {
		tok, err := e.issuer.Mint(testenv.Context(t), oauth.Token{Account: "acme", Resource: resource, Scope: strings.Join(scopes, " "), Client: "https://client.example/cimd"}, issued, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	full := mint(link, oauth.ToolScopes("kit"), time.Now(), time.Hour)
	cs, err := goSDKSession(t, link, full)
	if err != nil {
		t.Fatalf("a token for the link: %v", err)
	}
	if _, err := cs.ListTools(testenv.Context(t), nil); err != nil {
		t.Fatal(err)
	}
	if res, err := cs.CallTool(testenv.Context(t), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"x": 1}}); err != nil || res.IsError {
		t.Fatalf("call with a token: %v %+v", err, res)
	}
	if !strings.Contains(e.logs.String(), `"account":"acme","oauth_client":"https://client.example/cimd"`) {
		t.Fatalf("the access log names no OAuth client:\n%s", e.logs.String())
	}
	// And the request's trace names them too.
	exp := spans()
	const parent = "00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	mcpPost(t, link, map[string]string{"Authorization": "Bearer " + full, "traceparent": parent}, initialize)
	var traced map[string]string
	testenv.WaitFor(t, "the request's server span", func() bool {
		for _, sp := range exp.GetSpans() {
			if sp.SpanContext.TraceID().String() == "5bf92f3577b34da6a3ce929d0e0e4736" && sp.Name == "POST /mcp/:link" {
				traced = map[string]string{}
				for _, kv := range sp.Attributes {
					traced[string(kv.Key)] = kv.Value.String()
				}
				return true
			}
		}
		return false
	})
	if traced["toolgate.account"] != "acme" || traced["toolgate.oauth_client"] != "https://client.example/cimd" {
		t.Fatalf("the span names %v: want the account and the OAuth client", traced)
	}

	// The legacy transport of the same link: the same challenge, the same document,
	// and a stream for the token.
	for token, want := range map[string]int{"": http.StatusUnauthorized, full: http.StatusOK} {
		ctx, cancel := context.WithCancel(testenv.Context(t))
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, link+"/sse", nil)
		req.Header.Set("Accept", "text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != want {
			t.Fatalf("legacy SSE with token %v: %d, want %d", token != "", resp.StatusCode, want)
		}
		if want == http.StatusUnauthorized {
			if got, _ := oauth.MetadataURL(link); challenge(t, resp)["resource_metadata"] != got {
				t.Fatalf("legacy SSE challenge names %v, want the link's document", resp.Header.Get("WWW-Authenticate"))
			}
		}
		cancel()
		resp.Body.Close()
	}

	refused := func(name, token string, status int, code, errCode string) map[string]string {
		t.Helper()
		return expectRefused(t, name, link, token, callEcho, status, code, errCode)
	}
	refused("a token for another link", mint(otherLink, oauth.ToolScopes("other"), time.Now(), time.Hour), 401, gateway.CodeInvalidToken, "invalid_token")
	refused("an expired token", mint(link, oauth.ToolScopes("kit"), time.Now().Add(-2*time.Hour), time.Hour), 401, gateway.CodeInvalidToken, "invalid_token")
	refused("not a token", "eyJhbGciOiJub25lIn0.e30.", 401, gateway.CodeInvalidToken, "invalid_token")
	listOnly := mint(link, []string{oauth.ListScope("kit")}, time.Now(), time.Hour)
	if ch := refused("a token without the call scope", listOnly, 403, gateway.CodeInsufficientScope, "insufficient_scope"); ch["scope"] != "kit:call" {
		t.Fatalf("insufficient scope names %q, want kit:call", ch["scope"])
	}
	ls, err := goSDKSession(t, link, listOnly)
	if err != nil {
		t.Fatalf("a token that may list connects: %v", err)
	}
	if _, err := ls.ListTools(testenv.Context(t), nil); err != nil {
		t.Fatalf("a token that may list lists: %v", err)
	}
	refused("a token without the list scope", mint(link, []string{oauth.CallScope("kit")}, time.Now(), time.Hour), 403, gateway.CodeInsufficientScope, "insufficient_scope")

	// The account's API key still opens its link; another account's does not.
	if resp, body := mcpPost(t, link, map[string]string{"Authorization": "Bearer " + key}, initialize); resp.StatusCode != http.StatusOK {
		t.Fatalf("an API key on the link: %d %s", resp.StatusCode, body)
	}
	openKey := e.key("open", nil)
	if resp, _ := mcpPost(t, link, map[string]string{"Authorization": "Bearer " + openKey}, initialize); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("another account's key on the link: %d, want 401", resp.StatusCode)
	}
	// An account that does not require sign-in: its link is the credential, as before.
	if resp, body := mcpPost(t, openLink, nil, initialize); resp.StatusCode != http.StatusOK {
		t.Fatalf("a link of an account without sign-in: %d %s", resp.StatusCode, body)
	}
}

// TestToolEndpointsAreProtectedResources: /tools/{tool}/mcp takes an API key as
// before, or an access token issued for it (and no other resource's); without either
// it answers 401 naming its own metadata.
func TestToolEndpointsAreProtectedResources(t *testing.T) {
	e := newEnv(t, withMCP(), withSignIn())
	e.account("acme", registry.Limits{})
	e.serve(registry.Tool{ID: "kit", Title: "Kit", Methods: []registry.Method{{Name: "echo"}}}, func(method string, m *nats.Msg) { echo(method, m) })
	link := e.url + "/mcp/" + e.signer.Token("acme", "kit", e.connect("acme", "kit").LinkNonce)
	endpoint := e.url + "/tools/kit/mcp"

	resp, _ := mcpPost(t, endpoint, nil, initialize)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no credential: %d, want 401", resp.StatusCode)
	}
	var meta oauth.ResourceMetadata
	getJSON(t, challenge(t, resp)["resource_metadata"], &meta)
	if meta.Resource != endpoint || meta.AuthorizationServers[0] != e.url {
		t.Fatalf("metadata %+v: want resource %s", meta, endpoint)
	}
	mint := func(resource string) string {
		tok, err := e.issuer.Mint(context.Background(), oauth.Token{Account: "acme", Resource: resource, Scope: strings.Join(oauth.ToolScopes("kit"), " ")}, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	cs, err := goSDKSession(t, endpoint, mint(endpoint))
	if err != nil {
		t.Fatalf("a token for the endpoint: %v", err)
	}
	if res, err := cs.CallTool(testenv.Context(t), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if resp, _ := mcpPost(t, endpoint, map[string]string{"Authorization": "Bearer " + mint(link)}, initialize); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a token for the link at the endpoint: %d, want 401", resp.StatusCode)
	}
	if resp, _ := e.client.Get(e.url + oauth.ResourceWellKnown + "/mcp/tgl_nosuchlink"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("metadata of a link that does not exist: %d, want 404", resp.StatusCode)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
