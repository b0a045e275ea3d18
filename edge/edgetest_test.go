package edge_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/calls"
	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/edge/dashboard"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/payloads"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/sse"
)

// env is one real edge on 127.0.0.1 over a real NATS server and registry, with the
// tools of a test served by NATS responders written here. The responders stand in for
// the worker SDK: they subscribe in the tool's queue group and answer with the reply
// headers a worker sends.
type env struct {
	t         testing.TB
	nc        *nats.Conn
	store     *registry.Store
	view      *registry.View
	gw        *gateway.Gateway
	signer    *registry.LinkSigner
	edge      *edge.Edge
	url       string
	client    *http.Client
	adminKey  string
	logs      *testenv.Buffer
	srv       *server.Server       // the NATS server, when the env started it
	trail     *audit.Trail         // the audit trail, withAudit
	vault     *credentials.Vault   // the connections' credentials, withCredentials
	approvals *approvals.Approvals // the calls held for approval
	name      string               // the edge's instance name in the trail
	stop      func() error         // ends Serve and returns what it returned
	issuer    *oauth.Issuer        // the access tokens' issuer, withSignIn
	// the authorization server, withSignIn, whose tokens live tokenTTL
	authServer *oauth.Server
	tokenTTL   time.Duration
}

type envOptions struct {
	natsURL      string // join this server or cluster instead of starting one
	replicas     int
	server       func(*bus.ServerConfig)
	edge         func(*edge.Config)
	gateway      func(*gateway.Config)
	mcp          bool                 // serve MCP with the sse package, as toolgate edge does
	dashboard    bool                 // serve the dashboard, as toolgate edge does
	audit        bool                 // keep the audit trail, as toolgate edge does
	keys         *credentials.Keyring // keep credentials under these keys, as toolgate edge does
	approvals    func(*approvals.Config)
	payloadLimit int64         // the deployment's limit on a call's request and reply
	signIn       bool          // issue and check OAuth access tokens, as toolgate edge does
	tokenTTL     time.Duration // the access tokens' lifetime, withSignIn
	docs         *http.Client  // what fetches client ID metadata documents, withSignIn
	base         string        // the deployment's URL, when another edge's (asEdgeOf)
	oauthLimits  oauth.Limits  // the authorization server's limits, withSignIn (zero: its defaults)
	oauthUnused  time.Duration // how long the authorization server keeps what goes unused (zero: its default)
}

type option func(*envOptions)

func withEdge(f func(*edge.Config)) option          { return func(o *envOptions) { o.edge = f } }
func withServer(f func(*bus.ServerConfig)) option   { return func(o *envOptions) { o.server = f } }
func withMCP() option                               { return func(o *envOptions) { o.mcp = true } }
func withDashboard() option                         { return func(o *envOptions) { o.dashboard = true } }
func withAudit() option                             { return func(o *envOptions) { o.audit = true } }
func onCluster(url string) option                   { return func(o *envOptions) { o.natsURL, o.replicas = url, 3 } }
func onServer(url string) option                    { return func(o *envOptions) { o.natsURL = url } }
func withGateway(f func(*gateway.Config)) option    { return func(o *envOptions) { o.gateway = f } }
func withCredentials(k *credentials.Keyring) option { return func(o *envOptions) { o.keys = k } }
func withApprovals(f func(*approvals.Config)) option {
	return func(o *envOptions) { o.approvals = f }
}

// asEdgeOf serves the deployment whose base URL (and issuer) is url: one more edge
// of it, as edges behind one load balancer are.
func asEdgeOf(url string) option               { return func(o *envOptions) { o.base = url } }
func withPayloadLimit(n int64) option          { return func(o *envOptions) { o.payloadLimit = n } }
func withSignIn() option                       { return withTokenTTL(time.Hour) }
func withDocumentClient(c *http.Client) option { return func(o *envOptions) { o.docs = c } }
func withOAuthLimits(l oauth.Limits) option    { return func(o *envOptions) { o.oauthLimits = l } }
func withOAuthUnusedLifetime(d time.Duration) option {
	return func(o *envOptions) { o.oauthUnused = d }
}
func withTokenTTL(d time.Duration) option {
	return func(o *envOptions) { o.signIn, o.tokenTTL = true, d }
}

func newEnv(t testing.TB, opts ...option) *env {
	t.Helper()
	o := envOptions{replicas: 1, payloadLimit: edge.DefaultMaxPayloadBytes}
	for _, opt := range opts {
		opt(&o)
	}
	edit := o.server
	if edit == nil {
		edit = func(*bus.ServerConfig) {}
	}
	e := &env{t: t, logs: &testenv.Buffer{}, adminKey: registry.NewKey(), tokenTTL: o.tokenTTL}
	if o.natsURL == "" {
		e.srv = testenv.ServerWith(t, edit)
		o.natsURL = e.srv.ClientURL()
	}
	e.nc = testenv.Conn(t, o.natsURL)
	e.store = testenv.Store(t, e.nc, o.replicas)
	e.view = testenv.View(t, e.store)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.url, e.name = "http://"+ln.Addr().String(), "edge-"+ln.Addr().String()
	// As toolgate edge runs it: rate limits in the shared buckets, quotas counted.
	gwOpts := []gateway.Option{gateway.WithSharedRates(e.store, testenv.Logger(t)), gateway.WithQuotas(e.store)}
	if o.audit {
		e.trail = openTrail(t, e.nc, o.replicas, e.name)
		gwOpts = append(gwOpts, gateway.WithAudit(e.trail))
	}
	if o.keys != nil {
		if e.vault, err = credentials.Open(testenv.Context(t), e.store, o.keys, false); err != nil {
			t.Fatal(err)
		}
		e.vault.Follow(testenv.Context(t), testenv.Logger(t))
		gwOpts = append(gwOpts, gateway.WithCredentials(e.vault))
		if o.dashboard {
			gwOpts = append(gwOpts, gateway.WithConnectURL(func(tool string) string { return edge.ConnectURL(e.url, tool) }))
		}
	}
	// As toolgate edge runs it: the claim check for payloads past one message.
	payloadStore, err := payloads.Open(testenv.Context(t), e.nc, o.replicas)
	if err != nil {
		t.Fatal(err)
	}
	gwOpts = append(gwOpts, gateway.WithPayloads(payloadStore, o.payloadLimit))
	// As toolgate edge runs it: the calls held for a person's approval, in tg-approvals.
	acfg := approvals.DefaultConfig()
	if o.approvals != nil {
		o.approvals(&acfg)
	}
	if e.approvals, err = approvals.Open(testenv.Context(t), e.nc, e.store, acfg, e.trail, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	gwOpts = append(gwOpts, gateway.WithApprovals(e.approvals))
	gcfg := gateway.DefaultConfig()
	if o.gateway != nil {
		o.gateway(&gcfg)
	}
	if e.gw, err = gateway.New(e.nc, e.view, gcfg, gwOpts...); err != nil {
		t.Fatal(err)
	}
	e.signer = sharedSigner
	cfg := edge.DefaultConfig()
	cfg.BaseURL = cmp.Or(o.base, e.url)
	cfg.AdminKeyHash = registry.Hash(e.adminKey)
	cfg.DrainDelay = 0 // tests stop their edge at once; TestShutdownDrains gives it one
	cfg.Credentials, cfg.Approvals = e.vault, e.approvals
	cfg.MaxPayloadBytes = o.payloadLimit
	if o.signIn {
		keys, err := oauth.OpenKeys(testenv.Context(t), e.store, 24*time.Hour, o.keys)
		if err != nil {
			t.Fatal(err)
		}
		e.issuer = oauth.NewIssuer(cfg.BaseURL, keys)
		cfg.SignIn = e.issuer
		login := e.url + edge.DashboardPath + dashboard.ConsentPath + "?id="
		// The server first: it makes the grants' bucket with its lifetime, which
		// the issuer's revocation check then reads.
		if e.authServer, err = oauth.NewServer(testenv.Context(t), e.store, e.issuer, oauth.ServerConfig{
			TokenTTL: e.tokenTTL, LoginURL: func(id string) string { return login + id }, HTTPClient: o.docs,
			LoopbackDocuments: true, // the tests' clients serve their documents on 127.0.0.1
			Limits:            o.oauthLimits, UnusedLifetime: o.oauthUnused,
		}); err != nil {
			t.Fatal(err)
		}
		if err := e.issuer.CheckRevocations(testenv.Context(t), e.store, e.view); err != nil {
			t.Fatal(err)
		}
		cfg.AuthServer = e.authServer
	}
	if o.edge != nil {
		o.edge(&cfg)
	}
	log := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// As toolgate edge runs it: the calls that outlive their request, in tg-calls,
	// which keep the MCP tasks too.
	if cfg.Calls, err = calls.Open(testenv.Context(t), e.nc, e.store, calls.Config{Subjects: wire.DefaultSubjects}, log); err != nil {
		t.Fatal(err)
	}
	if o.mcp {
		mcfg := sse.DefaultConfig()
		mcfg.Tasks, mcfg.Approvals = cfg.Calls, cfg.Approvals
		if cfg.MCP, err = sse.New(testenv.Context(t), e.gw, e.store, mcfg, log); err != nil {
			t.Fatal(err)
		}
	}
	if o.dashboard {
		dcfg := dashboard.DefaultConfig()
		dcfg.BaseURL, dcfg.Approvals = e.url, e.approvals
		if e.vault != nil {
			dcfg.Connector = e.vault
		}
		dcfg.SignIn = e.authServer
		if cfg.IdP != nil {
			dcfg.IdP = cfg.IdP.URL
		}
		if cfg.Dashboard, err = dashboard.New(dcfg, e.gw, e.store, e.signer, log); err != nil {
			t.Fatal(err)
		}
	}
	if e.edge, err = edge.New(e.gw, e.store, e.signer, cfg, log); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.edge.Serve(ctx, ln) }()
	e.stop = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() {
		if err := e.stop(); err != nil {
			t.Errorf("edge: serve: %v", err)
		}
		if t.Failed() {
			t.Logf("edge log:\n%s", e.logs.String())
		}
	})
	e.client = &http.Client{Timeout: 30 * time.Second}
	t.Cleanup(e.client.CloseIdleConnections)
	return e
}

// openTrail opens the audit trail as an edge named name does, and writes what it holds
// once the test's edge has stopped.
func openTrail(t testing.TB, nc *nats.Conn, replicas int, name string) *audit.Trail {
	t.Helper()
	trail, err := audit.Open(testenv.Context(t), nc, audit.Options{Replicas: replicas, Edge: name}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
		defer cancel()
		if err := trail.Close(ctx); err != nil {
			t.Errorf("audit trail: %v", err)
		}
	})
	return trail
}

// sharedSigner lets edges of one test cluster agree on links, as edges of one
// deployment share the link secret.
var sharedSigner = func() *registry.LinkSigner {
	s, err := registry.NewLinkSigner([]byte(registry.NewLinkSecret()))
	if err != nil {
		panic(err)
	}
	return s
}()

// account creates an account with a key and waits until the edge's view has both.
func (e *env) account(id string, limits registry.Limits) string {
	e.t.Helper()
	return e.accountKey(id, limits, nil)
}

func (e *env) accountKey(id string, limits registry.Limits, scopes []string) string {
	e.t.Helper()
	ctx := testenv.Context(e.t)
	if _, err := e.store.CreateAccount(ctx, registry.Account{ID: id, Name: id, Limits: limits}); err != nil {
		e.t.Fatal(err)
	}
	return e.key(id, scopes)
}

func (e *env) key(account string, scopes []string) string {
	e.t.Helper()
	_, secret, err := e.store.CreateKey(testenv.Context(e.t), registry.NewKeyRequest{Account: account, Name: "test", Scopes: scopes})
	if err != nil {
		e.t.Fatal(err)
	}
	testenv.WaitFor(e.t, "the edge sees the new key", func() bool {
		_, err := e.view.Snapshot().AuthenticateKey(secret, time.Now())
		return err == nil
	})
	return secret
}

// connect makes tool available to account and waits until the edge sees it.
func (e *env) connect(account, tool string) *registry.Connection {
	e.t.Helper()
	c, err := e.store.Connect(testenv.Context(e.t), account, tool, e.signer)
	if err != nil {
		e.t.Fatal(err)
	}
	token := e.signer.Token(account, tool, c.LinkNonce)
	testenv.WaitFor(e.t, "the edge sees the connection and its link", func() bool {
		_, err := e.view.Snapshot().AuthenticateLink(token)
		return e.view.Snapshot().Connection(account, tool) != nil && err == nil
	})
	return c
}

// deploy writes a tool's record, as a worker does at start, without serving it.
func (e *env) deploy(tool registry.Tool) {
	e.t.Helper()
	if err := e.store.PutTool(testenv.Context(e.t), tool); err != nil {
		e.t.Fatal(err)
	}
	testenv.WaitFor(e.t, "the edge sees tool "+tool.ID, func() bool {
		t := e.view.Snapshot().RawTool(tool.ID)
		return t != nil && len(t.Tool.Methods) == len(tool.Methods)
	})
}

// serve deploys a tool and answers each of its methods with handle, on a connection
// of its own in the tool's queue group, keeping its presence alive until the test ends.
func (e *env) serve(tool registry.Tool, handle func(method string, m *nats.Msg)) {
	e.t.Helper()
	e.deploy(tool)
	wc := testenv.Conn(e.t, e.nc.ConnectedUrl())
	subjects := wire.DefaultSubjects
	for _, m := range tool.Methods {
		name := m.Name
		_, err := wc.QueueSubscribe(subjects.Call(tool.ID, name), subjects.QueueGroup(tool.ID), func(msg *nats.Msg) {
			go handle(name, msg) // like a worker: calls run concurrently
		})
		if err != nil {
			e.t.Fatal(err)
		}
	}
	if err := wc.Flush(); err != nil {
		e.t.Fatal(err)
	}
	testenv.KeepPresent(e.t, e.store, registry.Presence{Tool: tool.ID, Instance: "test-" + tool.ID, Host: "localhost", StartedAt: time.Now()})
	testenv.WaitFor(e.t, "the edge sees "+tool.ID+" online", func() bool {
		return e.view.Snapshot().Instances(tool.ID) > 0
	})
}

// respond answers a call as a worker does: a status (Tg-Status), a content type and bytes.
func respond(m *nats.Msg, status int, contentType string, body []byte) {
	_ = m.RespondMsg(wire.RawReply(m.Reply, status, contentType, body))
}

// respondError answers with a tool's own error, in the nats micro error headers.
func respondError(m *nats.Msg, code, message string) {
	_ = m.RespondMsg(wire.ErrorReply(m.Reply, &wire.ToolError{Code: code, Message: message}))
}

// echo answers with the parameters it was given.
func echo(_ string, m *nats.Msg) { respond(m, 0, "application/json", m.Data) }

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// The tools the tests call.
var (
	emailSchema = json.RawMessage(`{
		"type": "object",
		"properties": {
			"to": {"type": "string", "format": "email"},
			"subject": {"type": "string"},
			"body": {"type": "string"}
		},
		"required": ["to", "subject", "body"]
	}`)
	emailTool = registry.Tool{ID: "email", Title: "E-mail", Description: "Sends e-mail.", Version: "1.0.0",
		Methods: []registry.Method{{Name: "send_email", Description: "Send one message.", InputSchema: emailSchema,
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`)}}}
	echoTool = registry.Tool{ID: "echo", Title: "Echo", Methods: []registry.Method{{Name: "echo"}}}
)

const goodEmail = `{"to":"ada@example.com","subject":"hi","body":"hello"}`

// result is an HTTP answer as the caller sees it.
type result struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request; headers come in name, value pairs. A request that fails
// fails the test.
func (e *env) do(method, path, body string, headers ...string) result {
	e.t.Helper()
	r, err := e.send(method, path, body, headers...)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// send is do returning what failed rather than failing the test: for a goroutine
// the test starts, where t.Fatal must not run.
func (e *env) send(method, path, body string, headers ...string) (result, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		return result{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return result{}, err
	}
	return result{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// call makes a tool call with key.
func (e *env) call(key, tool, method, body string, headers ...string) result {
	e.t.Helper()
	return e.do(http.MethodPost, "/tool-call/"+tool+"/"+method, body, toolCallHeaders(key, headers)...)
}

// callInBackground makes a tool call with key on a goroutine of its own, and returns
// where its answer comes. A request that fails there is reported with t.Error (t.Fatal
// must run on the test's goroutine), and its answer is a zero result.
func (e *env) callInBackground(key, tool, method, body string, headers ...string) <-chan result {
	answer := make(chan result, 1)
	go func() {
		r, err := e.send(http.MethodPost, "/tool-call/"+tool+"/"+method, body, toolCallHeaders(key, headers)...)
		if err != nil {
			e.t.Errorf("tool call %s/%s: %v", tool, method, err)
		}
		answer <- r
	}()
	return answer
}

func toolCallHeaders(key string, headers []string) []string {
	return append([]string{"SERVICE_API_KEY", key}, headers...)
}

func (e *env) admin(method, path, body string) result {
	e.t.Helper()
	return e.do(method, "/admin"+path, body, "Authorization", "Bearer "+e.adminKey)
}

// envelope decodes an error answer, failing the test if it is not one.
func (r result) envelope(t testing.TB) edge.EnvelopeError {
	t.Helper()
	var env edge.Envelope
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil || env.Error.Code == "" {
		t.Fatalf("not an error envelope (status %d): %s", r.status, r.body)
	}
	if env.Error.RequestID == "" || env.Error.RequestID != r.header.Get("X-Request-Id") {
		t.Fatalf("envelope request_id %q, X-Request-Id %q: want the same, not empty", env.Error.RequestID, r.header.Get("X-Request-Id"))
	}
	return env.Error
}

// expect checks an error answer's status and code.
func (r result) expect(t testing.TB, status int, code string) edge.EnvelopeError {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	got := r.envelope(t)
	if got.Code != code {
		t.Fatalf("code %q, want %q; body %s", got.Code, code, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("envelope Content-Type %q, want application/json", ct)
	}
	return got
}

func decode[T any](t testing.TB, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decode %T: %v; body %s", v, err, r.body)
	}
	return v
}
