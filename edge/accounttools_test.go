package edge_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testidp"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
	"github.com/toolgate/toolgate/workers/mcpbridge"
)

// perUserServer is a remote MCP server behind the go-sdk's bearer check, whose
// tokens the provider's userinfo endpoint vouches for, and which lists different
// tools to its two users: "shared" to both, "only_one" to the provider's first user
// (subject id1), "only_two" to its second. Each tool answers its name and the
// subject it acted for; hits counts the calls each tool took.
func perUserServer(t *testing.T, idp *testidp.Provider) (serverURL string, hits map[string]*atomic.Int64) {
	t.Helper()
	hits = map[string]*atomic.Int64{"shared": {}, "only_one": {}, "only_two": {}}
	servers := map[string]*mcp.Server{}
	for sub, tools := range map[string][]string{"id1": {"shared", "only_one"}, "id2": {"shared", "only_two"}} {
		s := mcp.NewServer(&mcp.Implementation{Name: "calendar", Version: "1.0.0"}, nil)
		for _, name := range tools {
			s.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					hits[name].Add(1)
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " as " + sub}}}, nil
				})
		}
		servers[sub] = s
	}
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, idp.Issuer+"/userinfo", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		var info struct {
			Sub string `json:"sub"`
		}
		if res.StatusCode != http.StatusOK || json.NewDecoder(res.Body).Decode(&info) != nil || servers[info.Sub] == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: info.Sub, Expiration: time.Now().Add(time.Hour)}, nil
	}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	handler := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		return servers[auth.TokenInfoFromContext(r.Context()).UserID]
	}, nil)
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: srv.URL + "/meta"})(handler))
	mux.Handle("/meta", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{Resource: srv.URL + "/mcp",
		AuthorizationServers: []string{idp.Issuer}, ScopesSupported: []string{"openid", "offline_access"}}))
	return srv.URL + "/mcp", hits
}

// runOAuthBridge runs `toolgate worker mcp --url serverURL --oauth` as tool
// calendar, keeping lists accounts' tool lists, on a connection of its own, until
// the test ends or stop is called.
func runOAuthBridge(t *testing.T, e *env, serverURL string, lists int) (stop func()) {
	t.Helper()
	nc, err := nats.Connect(e.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	sealKey, _ := nkeys.CreateCurveKeys()
	cfg := mcpbridge.DefaultConfig()
	cfg.Tool, cfg.URL, cfg.AccountLists = "calendar", serverURL, lists
	cfg.OAuth = &mcpbridge.OAuthClient{GatewayURL: e.url, ClientID: "toolgate", HTTP: &http.Client{Timeout: testenv.Patience}}
	b := mcpbridge.New(nc, cfg, nil, workers.WithSealKey(sealKey))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			nc.Close()
		})
	}
	t.Cleanup(stop)
	select {
	case <-b.Ready():
	case err := <-done:
		t.Fatalf("the bridge stopped: %v", err)
	case <-time.After(testenv.Patience):
		t.Fatal("the bridge did not start")
	}
	return stop
}

// methodNamesOf are the names of a tool's methods as an account's key sees them on
// the direct tool API.
func methodNamesOf(info edge.ToolInfo) []string {
	var names []string
	for _, m := range info.Methods {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}

// TestBridgedOAuthToolPerAccount: a remote MCP server that requires OAuth, bridged
// with --oauth, lists different tools to two accounts' tokens (two users of a real
// OpenID provider). Each account sees exactly the tools its own token lists, in
// get-tools, GET /tools/{tool}, its OpenAPI document, the dashboard and an MCP
// client's tools/list through its link, and calls them; a tool only the other
// account's token lists is method_not_found for it, over HTTP and MCP, and never
// reaches the server, even sent straight on the bus past the edge (the bridge checks
// the account's own list). When the server then refuses one account's token (the
// provider revoked its grant), its call gets connection_required with the connect
// URL, the connection shows needs_reauthorization, and its later calls are refused
// before the server; the other account is untouched.
func TestBridgedOAuthToolPerAccount(t *testing.T) {
	e := newEnv(t, withCredentials(testKeyring(t)), withDashboard(), withMCP())
	idp := testidp.Start(t, testidp.Options{ClientID: "toolgate", ClientSecret: "client-secret-77b1", RedirectURI: e.url + edge.OAuthCallbackPath})
	if err := e.vault.EnableOAuth(testenv.Context(t), credentials.DefaultOAuthConfig(e.url+edge.OAuthCallbackPath), false); err != nil {
		t.Fatal(err)
	}
	serverURL, hits := perUserServer(t, idp)
	runOAuthBridge(t, e, serverURL, mcpbridge.DefaultAccountLists)
	testenv.WaitFor(t, "the edge sees the tool", func() bool { return e.view.Snapshot().RawTool("calendar") != nil })
	if r := e.admin(http.MethodPut, "/tools/calendar/oauth-client", `{"client_secret":"client-secret-77b1"}`); r.status != http.StatusNoContent {
		t.Fatalf("PUT oauth-client: %d %s", r.status, r.body)
	}
	type account struct {
		id, user, key, link string
		own, other          string // the tool only its token lists, and the other's
	}
	accounts := []*account{
		{id: "acme", user: idp.Username(), own: "only_one", other: "only_two"},
		{id: "globex", user: testidp.SecondUsername, own: "only_two", other: "only_one"},
	}
	for _, a := range accounts {
		a.key = e.accountKey(a.id, registry.Limits{}, nil)
		conn := e.connect(a.id, "calendar")
		a.link = e.url + "/mcp/" + e.signer.Token(a.id, "calendar", conn.LinkNonce)
		auth := decode[edge.Authorization](t, e.admin(http.MethodPost, "/connections/"+a.id+"/calendar/authorize", ""))
		if status, body, err := idp.SignInAs(auth.ConnectURL, a.user); err != nil || status != http.StatusOK {
			t.Fatalf("%s connects: %d %s %v", a.id, status, body, err)
		}
	}
	for _, a := range accounts {
		want := []string{a.own, "shared"}
		slices.Sort(want)
		testenv.WaitFor(t, a.id+" sees its own tools", func() bool {
			return slices.Equal(methodNamesOf(decode[edge.ToolInfo](t, e.do(http.MethodGet, "/tools/calendar", "", "SERVICE_API_KEY", a.key))), want)
		})
		list := decode[edge.ToolList](t, e.do(http.MethodGet, "/get-tools", "", "SERVICE_API_KEY", a.key))
		if len(list.Tools) != 1 || !slices.Equal(methodNamesOf(list.Tools[0]), want) {
			t.Fatalf("%s's get-tools: %+v; want the methods %v", a.id, list.Tools, want)
		}
		if page := dashboardPage(t, e, a.key, "tools/calendar/api"); !strings.Contains(page, a.own) || strings.Contains(page, a.other) {
			t.Fatalf("%s's dashboard page of the tool names %s, or not %s:\n%s", a.id, a.other, a.own, page)
		}
		r := e.call(a.key, "calendar", a.own, "{}")
		if r.status != http.StatusOK || !strings.Contains(string(r.body), a.own+" as ") {
			t.Fatalf("%s calls %s: %d %s", a.id, a.own, r.status, r.body)
		}
		e.call(a.key, "calendar", a.other, "{}").expect(t, http.StatusNotFound, edge.CodeMethodNotFound)
		info := decode[edge.ToolInfo](t, e.do(http.MethodGet, "/tools/calendar", "", "SERVICE_API_KEY", a.key))
		if doc := e.do(http.MethodGet, strings.TrimPrefix(info.OpenAPIURL, e.url), "", "SERVICE_API_KEY", a.key); doc.status != http.StatusOK ||
			!strings.Contains(string(doc.body), a.own) || strings.Contains(string(doc.body), a.other) {
			t.Fatalf("%s's OpenAPI document: %d, names %s or not %s:\n%s", a.id, doc.status, a.other, a.own, doc.body)
		}
		assertOwnToolsOverMCP(t, a.link, want, a.own, a.other)
	}
	assertNeverConnectedRefused(t, e)
	// Straight on the bus, past the edge's check, with acme's own sealed token: the
	// bridge refuses a tool acme's upstream session did not list, before the server.
	sealed, _, err := e.vault.Seal(testenv.Context(t), "acme", e.view.Snapshot().RawTool("calendar").Tool)
	if err != nil || sealed == "" {
		t.Fatalf("seal acme's token: %q %v", sealed, err)
	}
	req := &wire.Request{Tool: "calendar", Method: "only_two", CallID: "acme-straight", Account: "acme", Data: []byte("{}")}
	req.MCPContext.Header = nats.Header{wire.HeaderCredentials: {sealed}}
	_, err = bus.Do(testenv.Context(t), e.nc, wire.DefaultSubjects, req)
	var te *wire.ToolError
	if !errors.As(err, &te) || te.Code != wire.CodeMethodNotFound {
		t.Fatalf("acme's call of only_two straight on the bus: %v; want the bridge's method_not_found", err)
	}
	for _, name := range []string{"only_one", "only_two"} {
		if n := hits[name].Load(); n != 2 {
			t.Fatalf("the server's %s took %d calls; want 2, its own account's over HTTP and MCP", name, n)
		}
	}

	// The provider revokes acme's grant: the server refuses its token.
	if err := idp.RevokeAll(); err != nil {
		t.Fatal(err)
	}
	acme, globex := accounts[0], accounts[1]
	refused := e.call(acme.key, "calendar", "shared", "{}").expect(t, http.StatusConflict, "connection_required")
	if !strings.Contains(refused.Message, edge.ConnectURL(e.url, "calendar")) {
		t.Fatalf("the refused call: %q; want the connect URL", refused.Message)
	}
	st := decode[edge.ToolInfo](t, e.do(http.MethodGet, "/tools/calendar", "", "SERVICE_API_KEY", acme.key)).Connection
	if st == nil || st.State != edge.ConnectionNeedsReauth || st.ConnectURL != edge.ConnectURL(e.url, "calendar") {
		t.Fatalf("acme's connection after the server refused its token: %+v; want needs_reauthorization and the connect URL", st)
	}
	list := decode[edge.ToolList](t, e.do(http.MethodGet, "/get-tools", "", "SERVICE_API_KEY", acme.key))
	if len(list.Tools) != 1 || list.Tools[0].Connection == nil || list.Tools[0].Connection.State != edge.ConnectionNeedsReauth {
		t.Fatalf("acme's get-tools: %+v; want needs_reauthorization", list.Tools)
	}
	before := hits["shared"].Load()
	again := e.call(acme.key, "calendar", "shared", "{}").expect(t, http.StatusConflict, "connection_required")
	if !strings.Contains(again.Message, edge.ConnectURL(e.url, "calendar")) || hits["shared"].Load() != before {
		t.Fatalf("acme's next call: %q; want connection_required with the connect URL, refused before the server", again.Message)
	}
	if r := e.call(globex.key, "calendar", "shared", "{}"); r.status != http.StatusOK || !strings.Contains(string(r.body), "shared as id2") {
		t.Fatalf("globex's call after acme's grant was refused: %d %s", r.status, r.body)
	}
	if st := decode[edge.ToolInfo](t, e.do(http.MethodGet, "/tools/calendar", "", "SERVICE_API_KEY", globex.key)).Connection; st.State != edge.ConnectionReady {
		t.Fatalf("globex's connection: %+v; want ready", st)
	}
}

// assertOwnToolsOverMCP connects an MCP client (the go-sdk's) to link and checks that
// tools/list names exactly want, that own can be called, and that a call of other
// is refused.
func assertOwnToolsOverMCP(t *testing.T, link string, want []string, own, other string) {
	t.Helper()
	ctx := testenv.Context(t)
	c := mcp.NewClient(&mcp.Implementation{Name: "accounttools-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: link}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var names []string
	testenv.WaitFor(t, "the MCP client lists its account's tools", func() bool {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			return false
		}
		names = names[:0]
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		slices.Sort(names)
		return slices.Equal(names, want)
	})
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: own, Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("an MCP call of %s: %+v %v", own, res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: other, Arguments: map[string]any{}})
	if err == nil && !res.IsError {
		t.Fatalf("an MCP call of %s, which only another account's token lists: %+v; want it refused", other, res)
	}
}

// TestBridgedOAuthAccountListsBound: a bridge that keeps one account's tool list
// (--account-lists 1) forgets the first account's once the second's is read: the
// first then sees no method; its get-tools has the edge ask the bridge for its list
// again, after which it sees its own tools, and an MCP client through its link lists
// and calls them; the second account's list is forgotten in turn. A bridge started
// again has the first account's list back the same way.
func TestBridgedOAuthAccountListsBound(t *testing.T) {
	e := newEnv(t, withCredentials(testKeyring(t)), withMCP())
	idp := testidp.Start(t, testidp.Options{ClientID: "toolgate", ClientSecret: "client-secret-41c9", RedirectURI: e.url + edge.OAuthCallbackPath})
	if err := e.vault.EnableOAuth(testenv.Context(t), credentials.DefaultOAuthConfig(e.url+edge.OAuthCallbackPath), false); err != nil {
		t.Fatal(err)
	}
	serverURL, _ := perUserServer(t, idp)
	stop := runOAuthBridge(t, e, serverURL, 1)
	testenv.WaitFor(t, "the edge sees the tool", func() bool { return e.view.Snapshot().RawTool("calendar") != nil })
	if r := e.admin(http.MethodPut, "/tools/calendar/oauth-client", `{"client_secret":"client-secret-41c9"}`); r.status != http.StatusNoContent {
		t.Fatalf("PUT oauth-client: %d %s", r.status, r.body)
	}
	methods := func(key string) []string {
		return methodNamesOf(decode[edge.ToolInfo](t, e.do(http.MethodGet, "/tools/calendar", "", "SERVICE_API_KEY", key)))
	}
	keys, links := map[string]string{}, map[string]string{}
	for _, a := range []struct{ id, user, own string }{{"acme", idp.Username(), "only_one"}, {"globex", testidp.SecondUsername, "only_two"}} {
		keys[a.id] = e.accountKey(a.id, registry.Limits{}, nil)
		conn := e.connect(a.id, "calendar")
		links[a.id] = e.url + "/mcp/" + e.signer.Token(a.id, "calendar", conn.LinkNonce)
		auth := decode[edge.Authorization](t, e.admin(http.MethodPost, "/connections/"+a.id+"/calendar/authorize", ""))
		if status, body, err := idp.SignInAs(auth.ConnectURL, a.user); err != nil || status != http.StatusOK {
			t.Fatalf("%s connects: %d %s %v", a.id, status, body, err)
		}
		testenv.WaitFor(t, a.id+" sees its own tools", func() bool { return slices.Equal(methods(keys[a.id]), []string{a.own, "shared"}) })
	}
	if got := methodNamesOf(decode[edge.ToolInfo](t, e.do(http.MethodGet, "/tools/calendar", "", "SERVICE_API_KEY", keys["acme"]))); len(got) != 0 {
		t.Fatalf("acme, its list forgotten past the bound, sees %v; want none", got)
	}
	testenv.WaitFor(t, "acme's list is kept again", func() bool { return slices.Equal(methods(keys["acme"]), []string{"only_one", "shared"}) })
	if raw := e.view.Snapshot().RawTool("calendar").Tool.AccountMethods; raw.Of("globex") != nil || len(raw.Accounts) != 1 {
		t.Fatalf("the record's lists: %+v; want acme's alone, globex's forgotten", raw)
	}
	assertOwnToolsOverMCP(t, links["acme"], []string{"only_one", "shared"}, "only_one", "only_two")

	// A bridge started again knows no account's list: acme's next look at the tool
	// has it listed again.
	stop()
	runOAuthBridge(t, e, serverURL, 1)
	testenv.WaitFor(t, "the new bridge's record, with no list", func() bool {
		raw := e.view.Snapshot().RawTool("calendar")
		return raw != nil && raw.Tool.AccountMethods != nil && len(raw.Tool.AccountMethods.Accounts) == 0
	})
	testenv.WaitFor(t, "acme's list after the restart", func() bool { return slices.Equal(methods(keys["acme"]), []string{"only_one", "shared"}) })
}

// assertNeverConnectedRefused: an account that never connected the bridged OAuth
// tool, whose methods it therefore cannot know, gets connection_required with the
// connect URL for a call over REST (409), and the same, as an isError result, for a
// tools/call of an MCP client (the go-sdk's) through its link, not the unknown tool
// error; neither reaches the server.
func assertNeverConnectedRefused(t *testing.T, e *env) {
	t.Helper()
	key := e.accountKey("initech", registry.Limits{}, nil)
	link := e.url + "/mcp/" + e.signer.Token("initech", "calendar", e.connect("initech", "calendar").LinkNonce)
	connectURL := edge.ConnectURL(e.url, "calendar")
	if r := e.call(key, "calendar", "shared", "{}").expect(t, http.StatusConflict, "connection_required"); !strings.Contains(r.Message, connectURL) {
		t.Fatalf("initech's REST call: %q; want the connect URL", r.Message)
	}
	ctx := testenv.Context(t)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "accounttools-test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: link}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "shared", Arguments: map[string]any{}})
	if err != nil || !res.IsError || len(res.Content) != 1 {
		t.Fatalf("initech's MCP call: %+v %v; want an isError result", res, err)
	}
	if text, _ := res.Content[0].(*mcp.TextContent); text == nil || !strings.Contains(text.Text, connectURL) || !strings.Contains(text.Text, "needs "+wire.MissingOAuth) {
		t.Fatalf("initech's MCP call: %+v; want connection_required naming the connect URL", res.Content[0])
	}
}
