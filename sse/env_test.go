package sse_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/calls"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/sse"
)

const (
	testAccount = "acme"
	testTool    = "kit"
)

// env is a NATS system with the registry, one account connected to the kit tool, and
// a worker serving it.
type env struct {
	t        testing.TB
	urls     []string // client URL of each NATS node
	replicas int
	log      *slog.Logger // the edges' logger; nil for the test's log
	store    *registry.Store
	link     string // the link token of acme's connection to kit
	worker   *worker
}

func newEnv(t testing.TB) *env {
	srv := testenv.Server(t)
	return setupEnv(t, []string{srv.ClientURL()}, 1)
}

func newClusterEnv(t testing.TB) *env {
	c := testenv.NewCluster(t)
	var urls []string
	for _, s := range c.Servers {
		urls = append(urls, s.ClientURL())
	}
	return setupEnv(t, urls, 3)
}

func setupEnv(t testing.TB, urls []string, replicas int) *env {
	t.Helper()
	nc := testenv.Conn(t, urls[0])
	store := testenv.Store(t, nc, replicas)
	ctx := testenv.Context(t)
	if _, err := store.CreateAccount(ctx, registry.Account{ID: testAccount, Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	if err := store.PutTool(ctx, kitTool()); err != nil {
		t.Fatal(err)
	}
	signer := testenv.LinkSigner(t)
	conn, err := store.Connect(ctx, testAccount, testTool, signer)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, urls: urls, replicas: replicas, store: store, link: signer.Token(testAccount, testTool, conn.LinkNonce)}
	e.worker = startWorker(t, urls[len(urls)-1], store)
	return e
}

// kitTool is the tool the tests call; its methods are served by worker.
func kitTool(extra ...registry.Method) registry.Tool {
	methods := []registry.Method{
		{Name: "echo", Description: "Echoes its text", Title: "Echo",
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
		{Name: "count", Description: "Counts to n, reporting progress and logging each step",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)},
		{Name: "wait", Description: "Waits until cancelled"},
		{Name: "fail", Description: "Always fails"},
		{Name: "ask", Description: "Asks the client's model to sample a message and returns its text"},
		{Name: "route", Description: "Says where it would go; its region and count travel in headers too at 2026-07-28",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"count":{"type":"integer","x-mcp-header":"Count"}},"required":["region"]}`)},
		{Name: "confirm", Description: "Asks the user to confirm through elicitation and returns the answer"},
		{Name: "sleep", Description: "Sleeps for ms milliseconds, then answers",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer"}},"required":["ms"]}`)},
	}
	return registry.Tool{ID: testTool, Title: "Test kit", Description: "Tools for testing MCP transports", Version: "1",
		Methods: append(methods, extra...)}
}

// worker serves kit's methods over the bus, as a tool's worker process would.
type worker struct {
	nc        *nats.Conn
	mu        sync.Mutex
	running   map[string]func() // call id -> cancel
	started   chan string       // call ids of wait calls that began
	cancelled chan string       // call ids of calls whose cancel arrived
	sessions  chan string       // Tg-Session of every call
}

func startWorker(t testing.TB, url string, store *registry.Store) *worker {
	t.Helper()
	nc := testenv.Conn(t, url)
	w := &worker{nc: nc, running: map[string]func(){}, started: make(chan string, 16), cancelled: make(chan string, 16), sessions: make(chan string, 256)}
	subj := wire.DefaultSubjects
	// One subscription for every cancel, made at start: a subscription per call
	// could still be spreading through the cluster when its cancel is published.
	if _, err := nc.Subscribe(subj.CancelTool(testTool), func(msg *nats.Msg) {
		_, callID, _ := subj.ParseCancel(msg.Subject)
		w.mu.Lock()
		cancel := w.running[callID]
		w.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	}); err != nil {
		t.Fatal(err)
	}
	for _, m := range kitTool().Methods {
		_, err := nc.QueueSubscribe(subj.Call(testTool, m.Name), subj.QueueGroup(testTool), func(msg *nats.Msg) {
			go w.serve(m.Name, msg)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	if err := store.PutPresence(ctx, registry.Presence{Tool: testTool, Instance: "w1", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *worker) serve(method string, msg *nats.Msg) {
	subj := wire.DefaultSubjects
	reqID := msg.Header.Get(wire.HeaderCallID)
	session := msg.Header.Get(wire.HeaderSession)
	post := msg.Header.Get(wire.HeaderPost)
	select {
	case w.sessions <- session:
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	var cancelledByCaller atomic.Bool
	w.mu.Lock()
	w.running[reqID] = func() {
		cancelledByCaller.Store(true)
		cancel()
	}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.running, reqID)
		w.mu.Unlock()
	}()
	notify := func(n wire.Notification) {
		if msg.Header.Get(wire.HeaderProgress) == "" {
			return
		}
		b, _ := json.Marshal(n)
		_ = w.nc.Publish(subj.Progress(testTool, reqID), b)
	}
	var args map[string]any
	_ = json.Unmarshal(msg.Data, &args)

	switch method {
	case "echo":
		b, _ := json.Marshal(map[string]any{"text": args["text"]})
		_ = msg.Respond(b)
	case "count":
		n := int(args["n"].(float64))
		for i := 1; i <= n; i++ {
			notify(wire.Notification{Kind: wire.KindLog, Level: "info", Logger: "count", Message: "step"})
			notify(wire.Notification{Kind: wire.KindProgress, Progress: float64(i), Total: float64(n)})
		}
		b, _ := json.Marshal(map[string]any{"counted": n})
		_ = msg.Respond(b)
	case "wait":
		w.started <- reqID
		<-ctx.Done()
		if cancelledByCaller.Load() {
			w.cancelled <- reqID
		}
	case "sleep":
		select {
		case <-time.After(time.Duration(args["ms"].(float64)) * time.Millisecond):
			b, _ := json.Marshal(map[string]any{"slept": args["ms"]})
			_ = msg.Respond(b)
		case <-ctx.Done():
			if cancelledByCaller.Load() {
				w.cancelled <- reqID
			}
		}
	case "fail":
		_ = w.nc.PublishMsg(wire.ErrorReply(msg.Reply, &wire.ToolError{Code: "no_luck", Message: "the kit failed on purpose"}))
	case "route":
		b, _ := json.Marshal(map[string]any{"routed": args["region"], "count": args["count"]})
		_ = msg.Respond(b)
	case "confirm":
		res, err := askClient(ctx, w.nc, session, post, "elicitation/create", map[string]any{
			"message":         "Go ahead?",
			"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}},
		})
		if err != nil {
			_ = w.nc.PublishMsg(wire.ErrorReply(msg.Reply, &wire.ToolError{Code: "confirm_failed", Message: err.Error()}))
			return
		}
		_ = msg.Respond(res)
	case "ask":
		res, err := askClient(ctx, w.nc, session, post, "sampling/createMessage", map[string]any{
			"messages":  []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "say hi"}}},
			"maxTokens": 10,
		})
		if err != nil {
			_ = w.nc.PublishMsg(wire.ErrorReply(msg.Reply, &wire.ToolError{Code: "ask_failed", Message: err.Error()}))
			return
		}
		var sampled struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		_ = json.Unmarshal(res, &sampled)
		b, _ := json.Marshal(map[string]any{"sampled": sampled.Content.Text})
		_ = msg.Respond(b)
	}
}

// askClient sends a request to the client of a kit session, as the worker SDK does
// (workers.Call.Request): on the stream of the call's POST when the call names one
// (Tg-Post), else on the session's standalone stream; and returns the client's result.
func askClient(ctx context.Context, nc *nats.Conn, session, post, method string, params any) (json.RawMessage, error) {
	return askClientThen(ctx, nc, session, post, method, params, func() {})
}

// askClientThen is askClient that calls logged once the session's event log holds the
// request, before it waits for the answer.
func askClientThen(ctx context.Context, nc *nats.Conn, session, post, method string, params any, logged func()) (json.RawMessage, error) {
	subj := wire.DefaultSubjects
	id := "tg-" + nuid.Next()
	body, err := wire.SessionRequest(id, method, params)
	if err != nil {
		return nil, err
	}
	replies, err := nc.SubscribeSync(subj.SessionReply(testTool, session, id))
	if err != nil {
		return nil, err
	}
	defer replies.Unsubscribe()
	out := subj.SessionOut(testTool, session)
	if post != "" {
		out = subj.SessionPost(testTool, session, post)
	}
	ack, err := nc.RequestWithContext(ctx, out, body)
	if err != nil {
		return nil, err
	}
	if _, err := wire.ReadAck(ack); err != nil {
		return nil, err
	}
	logged()
	answer, err := replies.NextMsgWithContext(ctx)
	if err != nil {
		return nil, err
	}
	return wire.ReadSessionAnswer(answer.Data)
}

// inFlight is how many calls the worker is running.
func (w *worker) inFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}

// waitStarted waits for a wait call to begin and returns its call id.
func (w *worker) waitStarted(t *testing.T) string {
	t.Helper()
	select {
	case id := <-w.started:
		return id
	case <-time.After(testenv.Patience):
		t.Fatal("the wait call never reached the worker")
		return ""
	}
}

// waitCancelled waits for the cancel of call id to reach the worker.
func (w *worker) waitCancelled(t *testing.T, id string) {
	t.Helper()
	select {
	case got := <-w.cancelled:
		if got != id {
			t.Fatalf("cancel reached the worker for %s, want %s", got, id)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("the worker never saw the cancel")
	}
}

// addMethod gives kit one more method, as a redeployed worker would.
func (e *env) addMethod(t *testing.T, name string) {
	t.Helper()
	if err := e.store.PutTool(testenv.Context(t), kitTool(registry.Method{Name: name, Description: "added later"})); err != nil {
		t.Fatal(err)
	}
}

// edge is one edge: its own NATS connection, registry view, gateway and sse.Server,
// served on a real TCP listener behind a test-only link authentication.
type edge struct {
	url     string // http://127.0.0.1:port
	srv     *sse.Server
	http    *http.Server
	nc      *nats.Conn
	once    sync.Once
	deletes atomic.Int64 // DELETE requests the edge was sent
}

// kill takes the edge away as a crash would: its NATS connection, then every HTTP
// connection, closed with nothing drained and nothing said to anyone.
func (ed *edge) kill() {
	ed.nc.Close()
	_ = ed.http.Close()
}

func (e *env) startEdge(t testing.TB, node int, edit func(*sse.Config)) *edge {
	t.Helper()
	nc := testenv.Conn(t, e.urls[node])
	store := testenv.Store(t, nc, e.replicas)
	view := testenv.View(t, store)
	gw, err := gateway.New(nc, view, gateway.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := sse.DefaultConfig()
	cfg.RetryAfter = 200 * time.Millisecond
	cfg.ResumeGrace = time.Second
	if edit != nil {
		edit(&cfg)
	}
	// In a cluster a view has been seen, rarely, to start without the link written
	// just before; an edge is ready once it knows the link.
	testenv.WaitFor(t, "the edge knows the link", func() bool {
		_, err := view.Snapshot().AuthenticateLink(e.link)
		return err == nil
	})
	log := e.log
	if log == nil {
		log = testenv.Logger(t)
	}
	if cfg.Tasks == nil { // as toolgate edge runs it: MCP tasks kept in tg-calls
		if cfg.Tasks, err = calls.Open(testenv.Context(t), nc, store, calls.Config{Subjects: wire.DefaultSubjects}, log); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := sse.New(testenv.Context(t), gw, store, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ed := &edge{url: "http://" + ln.Addr().String(), srv: srv, nc: nc}
	mux := routes(view, srv)
	ed.http = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			ed.deletes.Add(1)
		}
		mux.ServeHTTP(w, r)
	})}
	go ed.http.Serve(ln)
	t.Cleanup(ed.stop)
	return ed
}

// stop drains the edge and shuts its HTTP server down, as a deployment would.
func (ed *edge) stop() {
	ed.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
		defer cancel()
		_ = ed.srv.Drain(ctx)
		_ = ed.http.Shutdown(ctx)
	})
}

// routes mounts the three MCP entry points the way the edge does, with the link in
// the path as the only credential.
func routes(view *registry.View, srv *sse.Server) http.Handler {
	mux := http.NewServeMux()
	auth := func(serve func(http.ResponseWriter, *http.Request, registry.Principal)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			p, err := view.Snapshot().AuthenticateLink(r.PathValue("link"))
			if err != nil {
				http.Error(w, "unknown link", http.StatusUnauthorized)
				return
			}
			serve(w, r, p)
		}
	}
	mux.Handle("/mcp/{link}/sse", auth(func(w http.ResponseWriter, r *http.Request, p registry.Principal) {
		srv.ServeSSE(w, r, p, p.Tool, "/mcp/"+r.PathValue("link")+"/messages")
	}))
	mux.Handle("/mcp/{link}/messages", auth(func(w http.ResponseWriter, r *http.Request, p registry.Principal) {
		srv.ServeMessages(w, r, p, p.Tool)
	}))
	mux.Handle("/mcp/{link}", auth(func(w http.ResponseWriter, r *http.Request, p registry.Principal) {
		srv.ServeStreamable(w, r, p, p.Tool)
	}))
	return mux
}

func (e *env) sseURL(base string) string        { return base + "/mcp/" + e.link + "/sse" }
func (e *env) streamableURL(base string) string { return base + "/mcp/" + e.link }
func (e *env) messagesURL(base, s string) string {
	return base + "/mcp/" + e.link + "/messages?session_id=" + s
}

// balancer is a reverse proxy in front of edges, like a load balancer without
// sticky sessions: route picks the edge of each request.
type balancer struct {
	url   string
	route atomic.Pointer[func(*http.Request) string]
}

func newBalancer(t *testing.T, route func(*http.Request) string) *balancer {
	t.Helper()
	b := &balancer{}
	b.route.Store(&route)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The body is sent from memory. Streamed from the inbound request, an edge
			// that answers with a stream before the proxy's transport has read the
			// inbound body to its end gets its connection torn down: the server
			// closes the inbound body when the proxy writes the answer's headers,
			// and the transport's final read of it fails.
			if pr.Out.Body != nil {
				body, _ := io.ReadAll(pr.Out.Body)
				pr.Out.Body = io.NopCloser(bytes.NewReader(body))
			}
			target, _ := url.Parse((*b.route.Load())(pr.Out))
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, err.Error(), http.StatusBadGateway)
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: proxy}
	go hs.Serve(ln)
	t.Cleanup(func() { _ = hs.Close() })
	b.url = "http://" + ln.Addr().String()
	return b
}

func (b *balancer) sendTo(route func(*http.Request) string) { b.route.Store(&route) }
