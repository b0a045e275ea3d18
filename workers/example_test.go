package workers_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/toolgate/toolgate/asks"
	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/busauth"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
)

type forecastIn struct {
	City string `json:"city" jsonschema:"the city to forecast"`
	Days int    `json:"days,omitempty" jsonschema:"how many days ahead; 1 when absent"`
}

type forecastOut struct {
	City    string    `json:"city"`
	Summary string    `json:"summary"`
	At      time.Time `json:"at"`
}

// A tool team's whole worker: declare the tool and its methods, then Run until the
// process is told to stop. Start as many such processes as the load needs; calls are
// spread over them, and each one drains when it stops.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	nc, err := nats.Connect("nats://127.0.0.1:4222", nats.Name("weather-worker"), nats.MaxReconnects(-1))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()

	w := workers.New(nc, workers.Tool{ID: "weather", Title: "Weather", Version: "1.0.0"})
	w.Handle(workers.Func("forecast", "Forecast the weather in a city",
		func(ctx context.Context, c *workers.Call, in forecastIn) (forecastOut, error) {
			if in.City == "" {
				return forecastOut{}, &workers.Error{Code: "unknown_city", Message: "no city given", Status: 404}
			}
			if err := c.Progress(1, 2, "asking the met office"); err != nil {
				return forecastOut{}, err
			}
			return forecastOut{City: in.City, Summary: "sunny", At: time.Now()}, nil
		}))
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// A worker that keeps state between calls, in its tool's state bucket: here, how many
// times each city was asked for. An admin made the bucket before (toolgate state
// create weather); the worker reaches it through the edges, which answer for its
// tool's bucket only.
func ExampleWorker_State() {
	ctx := context.Background()
	nc, err := nats.Connect("tls://nats.example.com:4222", nats.UserCredentials("weather.creds"),
		nats.RootCAs("ca.pem"), workers.Inbox("weather"))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()

	w := workers.New(nc, workers.Tool{ID: "weather", Title: "Weather", Version: "1.0.0"})
	asked, err := w.State(ctx)
	if err != nil {
		log.Fatal(err) // workers.ErrNoState: the bucket is not made yet
	}
	w.Handle(workers.Func("forecast", "Forecast the weather in a city",
		func(ctx context.Context, c *workers.Call, in forecastIn) (forecastOut, error) {
			key := base64.RawURLEncoding.EncodeToString([]byte(in.City)) // a key holds no spaces
			n := 0
			if v, _, err := asked.Get(ctx, key); err == nil {
				n, _ = strconv.Atoi(string(v))
			}
			if _, err := asked.Put(ctx, key, []byte(strconv.Itoa(n+1)), 0); err != nil {
				return forecastOut{}, err
			}
			return forecastOut{City: in.City, Summary: fmt.Sprintf("sunny (asked %d times)", n+1), At: time.Now()}, nil
		}))
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// The examples below run for real: each starts a NATS server with the registry's
// buckets (what `toolgate dev` runs), a worker on it, and calls the worker as an
// edge does, with the messages of the bus contract (bus.Do, bus/wire).

// exampleBus is a NATS server with the registry, for one example; with secure, it
// admits only a deployment's users, as a production bus does. connect is how the
// example's own edge connects.
type exampleBus struct {
	url     string
	dir     string
	deploy  *busauth.Deployment // with secure
	edge    *nats.Conn
	asked   *asks.Server
	stopSrv func()
}

func startExampleBus(secure bool) *exampleBus {
	dir, err := os.MkdirTemp("", "toolgate-example-")
	if err != nil {
		log.Fatal(err)
	}
	b := &exampleBus{dir: dir}
	cfg := bus.ServerConfig{Name: "example", Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(dir, "nats")}
	var edgeOpts []nats.Option
	if secure {
		if b.deploy, _, err = busauth.Init(filepath.Join(dir, "bus")); err != nil {
			log.Fatal(err)
		}
		if cfg.Auth, err = busauth.ServerAuth(b.deploy.ServerDir()); err != nil {
			log.Fatal(err)
		}
		// The example's edge sets the registry up too: it connects as the admin.
		edgeOpts = append(edgeOpts, nats.UserCredentials(b.deploy.CredsFile(busauth.RoleAdmin)))
	}
	srv, err := bus.StartServer(cfg)
	if err != nil {
		log.Fatal(err)
	}
	b.url, b.stopSrv = srv.ClientURL(), func() { srv.Shutdown(); srv.WaitForShutdown() }
	if b.edge, err = nats.Connect(b.url, edgeOpts...); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := registry.Open(ctx, b.edge, registry.DefaultOptions()); err != nil {
		log.Fatal(err)
	}
	// It answers the workers' asks (their records and presence), as every edge does.
	if b.asked, err = asks.Serve(b.edge, wire.DefaultSubjects, 0, slog.New(slog.DiscardHandler)); err != nil {
		log.Fatal(err)
	}
	return b
}

func (b *exampleBus) stop() {
	b.asked.Stop()
	b.edge.Close()
	b.stopSrv()
	_ = os.RemoveAll(b.dir)
}

// run runs w until the example stops it, and returns once it serves.
func run(w *workers.Worker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-w.Ready():
	case err := <-done:
		log.Fatal(err)
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			log.Fatal(err)
		}
	}
}

// call calls a tool as an edge does, and hands each progress or log notification of
// the call to note, in the order the worker sent them.
func (b *exampleBus) call(tool, method, params string, note func(wire.Notification)) (*wire.Reply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &wire.Request{Tool: tool, Method: method, CallID: nuid.Next(), Account: "acme",
		Deadline: time.Now().Add(10 * time.Second), Data: []byte(params), MCPContext: wire.MCPContext{Progress: note != nil}}
	notes := make(chan *nats.Msg, 64)
	if note != nil {
		sub, err := b.edge.ChanSubscribe(wire.DefaultSubjects.Progress(tool, req.CallID), notes)
		if err != nil {
			return nil, err
		}
		defer sub.Unsubscribe()
	}
	reply, err := bus.Do(ctx, b.edge, wire.DefaultSubjects, req)
	for len(notes) > 0 {
		if n, err := wire.ReadNotification((<-notes).Data); err == nil {
			note(n)
		}
	}
	return reply, err
}

// A plain method: its parameters and result are Go types, their JSON schemas made from
// them; an *workers.Error is the tool's own error, with its code and HTTP status.
func ExampleWorker_Handle() {
	b := startExampleBus(false)
	defer b.stop()
	nc, err := nats.Connect(b.url)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()

	type addIn struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	w := workers.New(nc, workers.Tool{ID: "calc", Title: "Calculator", Version: "1.0.0"})
	w.Handle(workers.Func("add", "Adds two integers", func(_ context.Context, _ *workers.Call, in addIn) (int, error) {
		if in.A < 0 || in.B < 0 {
			return 0, &workers.Error{Code: "negative", Message: "only natural numbers", Status: 422}
		}
		return in.A + in.B, nil
	}))
	defer run(w)()

	reply, err := b.call("calc", "add", `{"a":2,"b":3}`, nil)
	fmt.Println(reply.Status, string(reply.Data), err)
	_, err = b.call("calc", "add", `{"a":-1,"b":3}`, nil)
	var te *wire.ToolError
	if errors.As(err, &te) {
		fmt.Println(te.Status, te.Code, te.Message)
	}
	// Output:
	// 200 5 <nil>
	// 422 negative only natural numbers
}

// A method that streams: it reports its progress and logs as it goes. An MCP client
// that asked for them gets them as notifications while the call runs; the result
// comes last.
func ExampleCall_Progress() {
	b := startExampleBus(false)
	defer b.stop()
	nc, err := nats.Connect(b.url)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()

	type countIn struct {
		N int `json:"n"`
	}
	w := workers.New(nc, workers.Tool{ID: "counter", Version: "1.0.0"})
	w.Handle(workers.Func("count", "Counts to n", func(_ context.Context, c *workers.Call, in countIn) (string, error) {
		for i := 1; i <= in.N; i++ {
			if err := c.Progress(float64(i), float64(in.N), fmt.Sprintf("counted %d", i)); err != nil {
				return "", err
			}
		}
		if err := c.Log("info", "counter", "done counting"); err != nil {
			return "", err
		}
		return "done", nil
	}))
	defer run(w)()

	reply, err := b.call("counter", "count", `{"n":3}`, func(n wire.Notification) {
		switch n.Kind {
		case wire.KindProgress:
			fmt.Printf("progress %v/%v: %s\n", n.Progress, n.Total, n.Message)
		case wire.KindLog:
			fmt.Printf("log %s %s: %s\n", n.Level, n.Logger, n.Data)
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("result", string(reply.Data))
	// Output:
	// progress 1/3: counted 1
	// progress 2/3: counted 2
	// progress 3/3: counted 3
	// log info counter: "done counting"
	// result "done"
}

// An MCP resource: a tool that declares resources answers resources/list and
// resources/read (and prompts, completion) in its MCP handler, with the results the
// MCP specification gives them; a *workers.RPCError reaches the client as the JSON-RPC
// error it is.
func ExampleWorker_HandleMCP() {
	b := startExampleBus(false)
	defer b.stop()
	nc, err := nats.Connect(b.url)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()

	books := map[string]string{"book://1": "Once upon a time"}
	w := workers.New(nc, workers.Tool{ID: "library", Version: "1.0.0", Capabilities: workers.Capabilities{Resources: true}})
	w.HandleMCP(func(_ context.Context, c *workers.Call, method string) (any, error) {
		switch method {
		case "resources/list":
			return map[string]any{"resources": []map[string]string{{"uri": "book://1", "name": "The first book"}}}, nil
		case "resources/read":
			var p struct {
				URI string `json:"uri"`
			}
			if err := c.Bind(&p); err != nil {
				return nil, err
			}
			text, ok := books[p.URI]
			if !ok {
				return nil, &workers.RPCError{Code: -32002, Message: "resource not found: " + p.URI}
			}
			return map[string]any{"contents": []map[string]string{{"uri": p.URI, "mimeType": "text/plain", "text": text}}}, nil
		}
		return nil, &workers.RPCError{Code: workers.RPCMethodNotFound, Message: "no method " + method}
	})
	defer run(w)()

	ask := func(method, params string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		reply, err := bus.Do(ctx, b.edge, wire.DefaultSubjects, &wire.Request{Tool: "library", MCP: true, Method: method,
			CallID: nuid.Next(), Account: "acme", Data: []byte(params)})
		var re *wire.RPCError
		switch {
		case errors.As(err, &re):
			fmt.Println(method, "error", re.Code, re.Message)
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Println(method, string(reply.Data))
		}
	}
	ask("resources/list", `{}`)
	ask("resources/read", `{"uri":"book://1"}`)
	ask("resources/read", `{"uri":"book://2"}`)
	// Output:
	// resources/list {"resources":[{"name":"The first book","uri":"book://1"}]}
	// resources/read {"contents":[{"mimeType":"text/plain","text":"Once upon a time","uri":"book://1"}]}
	// resources/read error -32002 resource not found: book://2
}

// A worker on a production bus connects with the credentials file the deployment
// issued for its tool (`toolgate creds issue weather`): the bus lets it serve that
// tool's calls and ask the edges to write that tool's records, and nothing else.
func ExampleNew_credentials() {
	b := startExampleBus(true)
	defer b.stop()
	creds, _, err := b.deploy.IssueWorker([]string{"weather"}, "", 0)
	if err != nil {
		log.Fatal(err)
	}
	credsFile := filepath.Join(b.dir, "weather.creds")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		log.Fatal(err)
	}

	// The worker's own start: the file is all it needs besides the bus's address.
	nc, err := nats.Connect(b.url, nats.UserCredentials(credsFile), workers.Inbox("weather"),
		nats.Name("weather-worker"), nats.MaxReconnects(-1))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	w := workers.New(nc, workers.Tool{ID: "weather", Version: "1.0.0"})
	w.Handle(workers.Func("forecast", "Forecast the weather in a city",
		func(_ context.Context, _ *workers.Call, in forecastIn) (string, error) {
			return "sunny in " + in.City, nil
		}))
	defer run(w)()

	reply, err := b.call("weather", "forecast", `{"city":"Lisbon"}`, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(reply.Data))

	// The same file serves no other tool.
	other := workers.New(nc, workers.Tool{ID: "calendar", Version: "1.0.0"})
	other.Handle(workers.Func("today", "Today's date", func(context.Context, *workers.Call, struct{}) (string, error) {
		return "", nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	go func() { _ = other.Run(ctx) }()
	select {
	case <-other.Ready():
		fmt.Println("calendar: serving")
	case <-ctx.Done():
		fmt.Println("calendar: refused by the bus")
	}
	// Output:
	// "sunny in Lisbon"
	// calendar: refused by the bus
}
