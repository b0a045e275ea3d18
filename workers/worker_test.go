package workers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
)

type greetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

type greetOut struct {
	Greeting string `json:"greeting"`
}

var greetTool = workers.Tool{ID: "greeter", Title: "Greeter", Description: "Says hello", Version: "1.2.0"}

func greet() workers.Method {
	m := workers.Func("greet", "Greets someone", func(_ context.Context, _ *workers.Call, in greetIn) (greetOut, error) {
		return greetOut{Greeting: "hello, " + in.Name}, nil
	})
	m.Timeout = 5 * time.Second
	return m
}

func call(t *testing.T, e *env, tool, method, params string) (*wire.Reply, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	return bus.Do(ctx, e.nc, wire.DefaultSubjects, &wire.Request{Tool: tool, Method: method, CallID: registry.NewID("req_"), RequestID: registry.NewID("req_"), Account: "acme", Data: []byte(params)})
}

func TestWorkerInTheRegistry(t *testing.T) {
	e := newEnv(t)
	const ttl = 2 * time.Second // the instance killed below sets it: the bucket allows 10s

	t.Run("a started worker is in the view with its methods and schemas", func(t *testing.T) {
		in := e.start(greetTool, []workers.Method{greet()})
		// The view follows each bucket on its own: the presence may show before the tool.
		testenv.WaitFor(t, "presence and tool in the view", func() bool {
			s := e.view.Snapshot()
			return s.Instances("greeter") == 1 && s.RawTool("greeter") != nil
		})
		entry := e.view.Snapshot().RawTool("greeter")
		if entry == nil {
			t.Fatal("tool not in the view")
		}
		if entry.Tool.Title != "Greeter" || entry.Tool.Version != "1.2.0" || len(entry.Tool.Methods) != 1 {
			t.Fatalf("tool record: %+v", entry.Tool)
		}
		m := entry.Method("greet")
		if m == nil {
			t.Fatal("method greet not in the view")
		}
		if time.Duration(m.Method.Timeout) != 5*time.Second {
			t.Errorf("timeout: got %v, want 5s", time.Duration(m.Method.Timeout))
		}
		var in1 struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(m.Method.InputSchema, &in1); err != nil {
			t.Fatal(err)
		}
		if in1.Type != "object" || in1.Properties["name"] == nil || strings.Join(in1.Required, ",") != "name" {
			t.Errorf("input schema: %s", m.Method.InputSchema)
		}
		if !strings.Contains(string(m.Method.OutputSchema), `"greeting"`) {
			t.Errorf("output schema: %s", m.Method.OutputSchema)
		}
		if err := m.Validate([]byte(`{"name":"Ada"}`)); err != nil {
			t.Errorf("a valid call fails validation: %v", err)
		}
		if err := m.Validate([]byte(`{"nom":"Ada"}`)); err == nil {
			t.Error("a call without name passes validation")
		}
		p := e.view.Snapshot().Presence("greeter")[0]
		if p.Instance != in.Instance() || p.Version != "1.2.0" || p.StartedAt.IsZero() {
			t.Errorf("presence: %+v", p)
		}
		if err := in.stop(t); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a second instance does not rewrite an unchanged tool record", func(t *testing.T) {
		before, err := e.store.Tool(context.Background(), "greeter")
		if err != nil {
			t.Fatal(err)
		}
		e.start(greetTool, []workers.Method{greet()})
		after, err := e.store.Tool(context.Background(), "greeter")
		if err != nil {
			t.Fatal(err)
		}
		if !after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Errorf("updated_at moved from %v to %v", before.UpdatedAt, after.UpdatedAt)
		}
	})

	t.Run("it answers nats micro discovery with its endpoints", func(t *testing.T) {
		tool := greetTool
		tool.ID = "disco" // no other instance in its queue group, so the call below lands here
		e.start(tool, []workers.Method{greet()}, workers.WithInstance("solo"))
		if _, err := call(t, e, "disco", "greet", `{"name":"Ada"}`); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
		defer cancel()
		var found bool
		sub, err := e.nc.SubscribeSync(e.nc.NewRespInbox())
		if err != nil {
			t.Fatal(err)
		}
		if err := e.nc.PublishRequest("$SRV.INFO.disco", sub.Subject, nil); err != nil {
			t.Fatal(err)
		}
		for !found {
			msg, err := sub.NextMsgWithContext(ctx)
			if err != nil {
				t.Fatalf("no INFO from instance solo: %v", err)
			}
			var info micro.Info
			if err := json.Unmarshal(msg.Data, &info); err != nil {
				t.Fatal(err)
			}
			if info.Metadata["instance"] != "solo" {
				continue
			}
			found = true
			if info.Version != "1.2.0" || len(info.Endpoints) != 1 {
				t.Fatalf("info: %+v", info)
			}
			ep := info.Endpoints[0]
			if ep.Subject != "tg.call.disco.greet" || ep.QueueGroup != "tg.disco" {
				t.Errorf("endpoint: %+v", ep)
			}
		}
		reply, err := e.nc.RequestWithContext(ctx, "$SRV.STATS.disco."+serviceID(t, e, "disco", "solo"), nil)
		if err != nil {
			t.Fatal(err)
		}
		var stats struct {
			Endpoints []struct {
				NumRequests int                   `json:"num_requests"`
				Data        workers.EndpointStats `json:"data"`
			} `json:"endpoints"`
		}
		if err := json.Unmarshal(reply.Data, &stats); err != nil {
			t.Fatal(err)
		}
		if len(stats.Endpoints) != 1 || stats.Endpoints[0].NumRequests != 1 || stats.Endpoints[0].Data.Calls != 1 {
			t.Errorf("stats: %s", reply.Data)
		}
	})

	t.Run("a worker that stops cleanly leaves presence at once", func(t *testing.T) {
		// The default TTL, so that presence gone well before it was removed, not expired.
		in := e.start(workers.Tool{ID: "leaver"}, []workers.Method{greet()})
		testenv.WaitFor(t, "presence in the view", func() bool { return e.view.Snapshot().Instances("leaver") == 1 })
		start := time.Now()
		if err := in.stop(t); err != nil {
			t.Fatal(err)
		}
		testenv.EventuallyBefore(t, 500*time.Millisecond, wire.DefaultPresenceTTL/2, "presence gone", func() bool { return e.view.Snapshot().Instances("leaver") == 0 })
		t.Logf("presence left the view %v after the stop (TTL %v)", time.Since(start).Round(time.Millisecond), wire.DefaultPresenceTTL)
	})

	t.Run("a worker killed without drain leaves presence within its TTL", func(t *testing.T) {
		in := e.start(workers.Tool{ID: "killed"}, []workers.Method{greet()}, workers.WithPresenceTTL(ttl))
		testenv.WaitFor(t, "presence in the view", func() bool { return e.view.Snapshot().Instances("killed") == 1 })
		start := time.Now()
		in.nc.Close()
		select {
		case err := <-in.done:
			in.done <- err
			if !errors.Is(err, nats.ErrConnectionClosed) {
				t.Errorf("Run returned %v, want ErrConnectionClosed", err)
			}
		case <-time.After(testenv.Patience):
			t.Fatal("Run did not return after its connection closed")
		}
		if e.view.Snapshot().Instances("killed") != 1 {
			t.Fatal("presence gone at once: it should outlive the connection until its TTL")
		}
		// The key expires its own TTL after the last heartbeat; the server notices
		// within a moment more, and the view within a moment after that.
		testenv.WaitFor(t, "expired presence dropped", func() bool { return e.view.Snapshot().Instances("killed") == 0 })
		t.Logf("presence left the view %v after the kill (TTL %v)", time.Since(start).Round(time.Millisecond), ttl)
	})
}

func serviceID(t *testing.T, e *env, tool, instance string) string {
	t.Helper()
	sub, err := e.nc.SubscribeSync(e.nc.NewRespInbox())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := e.nc.PublishRequest("$SRV.PING."+tool, sub.Subject, nil); err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := sub.NextMsg(testenv.Patience)
		if err != nil {
			t.Fatalf("no PING from %s: %v", instance, err)
		}
		var ping micro.Ping
		if err := json.Unmarshal(msg.Data, &ping); err != nil {
			t.Fatal(err)
		}
		if ping.Metadata["instance"] == instance {
			return ping.ID
		}
	}
}

func TestWorkerRefusesBadDeclarations(t *testing.T) {
	e := newEnv(t)
	ok := func(context.Context, *workers.Call) (any, error) { return nil, nil }
	tests := []struct {
		name    string
		tool    workers.Tool
		methods []workers.Method
		opts    []workers.Option
		want    string
	}{
		{"a bad tool id is refused", workers.Tool{ID: "Bad.Id"}, nil, nil, "tool id"},
		{"a bad method name is refused", workers.Tool{ID: "t"}, []workers.Method{{Name: "a.b", Handler: ok}}, nil, "method name"},
		{"a method without a handler is refused", workers.Tool{ID: "t"}, []workers.Method{{Name: "m"}}, nil, "no handler"},
		{"a method declared twice is refused", workers.Tool{ID: "t"}, []workers.Method{{Name: "m", Handler: ok}, {Name: "m", Handler: ok}}, nil, "declared twice"},
		{"an input schema that does not compile is refused", workers.Tool{ID: "t"}, []workers.Method{{Name: "m", Handler: ok, InputSchema: json.RawMessage(`{"type":"nope"}`)}}, nil, "input schema"},
		{"parameters that are not an object are refused", workers.Tool{ID: "t"}, []workers.Method{workers.Func("m", "", func(context.Context, *workers.Call, string) (string, error) { return "", nil })}, nil, "JSON object"},
		{"a version that is not semantic is refused", workers.Tool{ID: "t", Version: "latest"}, []workers.Method{{Name: "m", Handler: ok}}, nil, "version"},
		{"resources without an MCP handler are refused", workers.Tool{ID: "t", Capabilities: workers.Capabilities{Resources: true}}, nil, nil, "HandleMCP"},
		{"a concurrency below one is refused", workers.Tool{ID: "t"}, nil, []workers.Option{workers.WithConcurrency(0)}, "concurrency"},
		{"a cancel memory of no time is refused", workers.Tool{ID: "t"}, nil, []workers.Option{workers.WithCancelMemory(0, 10)}, "cancel memory"},
		{"a cancel memory of no request ids is refused", workers.Tool{ID: "t"}, nil, []workers.Option{workers.WithCancelMemory(time.Minute, 0)}, "cancel memory"},
		{"a heartbeat as long as the TTL is refused", workers.Tool{ID: "t"}, nil, []workers.Option{workers.WithHeartbeat(time.Hour)}, "heartbeat"},
		{"a presence TTL under a second is refused", workers.Tool{ID: "t"}, nil, []workers.Option{workers.WithPresenceTTL(500 * time.Millisecond)}, "presence TTL"},
		{"an instance name with a dot is refused", workers.Tool{ID: "t"}, nil, []workers.Option{workers.WithInstance("a.b")}, "instance"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := workers.New(e.nc, tt.tool, tt.opts...)
			for _, m := range tt.methods {
				w.Handle(m)
			}
			ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
			defer cancel()
			err := w.Run(ctx)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run: got %v, want an error about %q", err, tt.want)
			}
		})
	}
}

func TestCallsReachEveryInstance(t *testing.T) {
	e := newEnv(t)
	var instances []*instance
	for range 2 {
		var in *instance
		whoami := workers.Method{Name: "whoami", Handler: func(context.Context, *workers.Call) (any, error) {
			return map[string]string{"instance": in.Instance()}, nil
		}}
		in = e.start(workers.Tool{ID: "pair"}, []workers.Method{whoami})
		instances = append(instances, in)
	}
	counts := map[string]int{}
	const n = 100
	for range n {
		r, err := call(t, e, "pair", "whoami", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Instance string }
		if err := json.Unmarshal(r.Data, &out); err != nil {
			t.Fatal(err)
		}
		counts[out.Instance]++
	}
	t.Logf("%d calls: %v", n, counts)
	for _, in := range instances {
		if counts[in.Instance()] == 0 {
			t.Errorf("instance %s got none of %d calls", in.Instance(), n)
		}
	}
}

func TestConcurrencyBound(t *testing.T) {
	e := newEnv(t)
	var running, peak atomic.Int32
	release := make(chan struct{})
	hold := workers.Method{Name: "hold", Handler: func(ctx context.Context, _ *workers.Call) (any, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release
		return "done", nil
	}}
	e.start(workers.Tool{ID: "bounded"}, []workers.Method{hold}, workers.WithConcurrency(2))

	const n = 6
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := call(t, e, "bounded", "hold", `{}`)
			errs <- err
		}()
	}
	testenv.WaitFor(t, "two calls running", func() bool { return running.Load() == 2 })
	time.Sleep(100 * time.Millisecond) // room for a third to start, if the bound let it: a wait for what must not happen
	if got := running.Load(); got != 2 {
		t.Fatalf("%d calls running at once, want the bound of 2", got)
	}
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("a call over the bound failed instead of waiting: %v", err)
		}
	}
	if peak.Load() != 2 {
		t.Errorf("peak concurrency %d, want 2", peak.Load())
	}
}

func TestDrainUnderLoadDropsNothing(t *testing.T) {
	e := newEnv(t)
	var served sync.Map // instance -> *atomic.Int64
	work := func(name *string) workers.Method {
		return workers.Method{Name: "work", Handler: func(ctx context.Context, c *workers.Call) (any, error) {
			time.Sleep(time.Duration(2+len(c.RequestID)%8) * time.Millisecond)
			v, _ := served.LoadOrStore(*name, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
			return map[string]string{"by": *name}, nil
		}}
	}
	nameA, nameB := "a", "b"
	a := e.start(workers.Tool{ID: "steady"}, []workers.Method{work(&nameA)}, workers.WithInstance(nameA), workers.WithConcurrency(4))
	e.start(workers.Tool{ID: "steady"}, []workers.Method{work(&nameB)}, workers.WithInstance(nameB), workers.WithConcurrency(4))

	const callers = 16
	var sent, answered, failed atomic.Int64
	var firstErr atomic.Value
	stopSending := make(chan struct{})
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for {
				select {
				case <-stopSending:
					return
				default:
				}
				sent.Add(1)
				if _, err := call(t, e, "steady", "work", `{}`); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				answered.Add(1)
			}
		})
	}
	testenv.WaitFor(t, "both instances serve calls", func() bool { return load(&served, "a") > 0 && load(&served, "b") > 0 })
	drainStart := time.Now()
	if err := a.stop(t); err != nil {
		t.Fatalf("drain: %v", err)
	}
	drained := time.Since(drainStart)
	a.nc.Close() // as the process would exit once Run returns: whatever was not answered is lost
	byAAtStop := load(&served, "a")
	byBAtStop := load(&served, "b")
	testenv.WaitFor(t, "instance b serves calls after a stopped", func() bool { return load(&served, "b") > byBAtStop+callers })
	close(stopSending)
	wg.Wait()

	t.Logf("sent %d, answered %d, failed %d; instance a served %d and drained in %v, b served %d (%d after a stopped)",
		sent.Load(), answered.Load(), failed.Load(), load(&served, "a"), drained.Round(time.Millisecond),
		load(&served, "b"), load(&served, "b")-byBAtStop)
	if failed.Load() != 0 {
		t.Fatalf("%d of %d calls failed; first: %v", failed.Load(), sent.Load(), firstErr.Load())
	}
	if answered.Load() != sent.Load() {
		t.Fatalf("sent %d calls, %d answered", sent.Load(), answered.Load())
	}
	if byAAtStop == 0 || load(&served, "a") != byAAtStop {
		t.Errorf("instance a served %d before its stop and %d in all: it should serve some, and none after", byAAtStop, load(&served, "a"))
	}
}

func load(m *sync.Map, key string) int64 {
	v, ok := m.Load(key)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

func TestClusterR3(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := testenv.NewCluster(t)
	nc := testenv.Conn(t, c.URL())
	store := testenv.Store(t, nc, 3)
	e := &env{t: t, url: c.URL(), nc: nc, store: store, view: testenv.View(t, store)}

	var greeter *instance
	t.Run("a worker registers and is callable", func(t *testing.T) {
		greeter = e.start(greetTool, []workers.Method{greet()})
		testenv.WaitFor(t, "presence in the view", func() bool { return e.view.Snapshot().Instances("greeter") == 1 })
		// The worker's subscription reaches the caller's node over the cluster's routes,
		// which may take a moment longer than its presence takes through JetStream.
		var r *wire.Reply
		var err error
		testenv.WaitFor(t, "the worker answers from another node", func() bool {
			r, err = call(t, e, "greeter", "greet", `{"name":"Ada"}`)
			return !errors.Is(err, bus.ErrNoResponders)
		})
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Data) != `{"greeting":"hello, Ada"}` {
			t.Errorf("reply %s", r.Data)
		}
	})

	t.Run("with one node stopped the registry stays readable and writable", func(t *testing.T) {
		if greeter == nil {
			t.Skip("no worker: the test before failed")
		}
		stopped := 0
		for i, s := range c.Servers {
			// A node neither the caller nor the worker is on, so the test measures the
			// registry, not a reconnect.
			if s.Name() != nc.ConnectedServerName() && s.Name() != greeter.nc.ConnectedServerName() {
				stopped = i
				break
			}
		}
		start := time.Now()
		c.Stop(stopped)
		ctx := testenv.Context(t)
		var err error
		testenv.WaitFor(t, "PutTool succeeds", func() bool {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			err = store.PutTool(pctx, registry.Tool{ID: "after-stop", Methods: []registry.Method{{Name: "m"}}})
			return err == nil
		})
		written := time.Now()
		// The view follows each bucket with an ordered consumer; when the node serving
		// it stops, the consumer is recreated only after missed heartbeats (about 20s).
		testenv.WaitFor(t, "the view sees the new tool", func() bool { return e.view.Snapshot().RawTool("after-stop") != nil })
		t.Logf("PutTool succeeded %v after node %d stopped; the view saw it %v later",
			written.Sub(start).Round(time.Millisecond), stopped+1, time.Since(written).Round(time.Millisecond))
		if _, err := store.Tool(ctx, "greeter"); err != nil {
			t.Fatalf("reading a tool: %v", err)
		}
		r, err := call(t, e, "greeter", "greet", `{"name":"Bo"}`)
		if err != nil {
			t.Fatalf("call after the stop: %v", err)
		}
		if string(r.Data) != `{"greeting":"hello, Bo"}` {
			t.Errorf("reply %s", r.Data)
		}
		if e.view.Snapshot().Instances("greeter") != 1 {
			t.Error("the worker's presence is gone from the view")
		}
	})
}

func ExampleFunc() {
	type addIn struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	m := workers.Func("add", "Adds two integers", func(_ context.Context, _ *workers.Call, in addIn) (int, error) {
		return in.A + in.B, nil
	})
	fmt.Println(string(m.InputSchema))
	// Output: {"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}
}

func TestSubjectPrefix(t *testing.T) {
	e := newEnv(t)
	alt := wire.Subjects{Prefix: "alt"}
	testenv.Asks(t, e.nc, alt)
	e.start(workers.Tool{ID: "prefixed"}, []workers.Method{greet()}, workers.WithSubjects(alt))
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()

	t.Run("a worker under another prefix answers on that prefix's subjects", func(t *testing.T) {
		r, err := bus.Do(ctx, e.nc, alt, &wire.Request{Tool: "prefixed", Method: "greet", CallID: "p1", RequestID: "p1", Data: []byte(`{"name":"Ada"}`)})
		if err != nil || string(r.Data) != `{"greeting":"hello, Ada"}` {
			t.Fatalf("got %v %v", err, r)
		}
	})
	t.Run("and not on the default prefix", func(t *testing.T) {
		_, err := bus.Do(ctx, e.nc, wire.DefaultSubjects, &wire.Request{Tool: "prefixed", Method: "greet", CallID: "p2", RequestID: "p2", Data: []byte(`{"name":"Ada"}`)})
		if !errors.Is(err, bus.ErrNoResponders) {
			t.Fatalf("got %v, want no responders", err)
		}
	})
}

func TestSetMethodsWhileServing(t *testing.T) {
	e := newEnv(t)
	answer := func(name, text string) workers.Method {
		return workers.Method{Name: name, Handler: func(context.Context, *workers.Call) (any, error) { return text, nil }}
	}
	in := e.start(workers.Tool{ID: "shifty"}, []workers.Method{answer("a", "first a")})
	methods := func() []string {
		entry := e.view.Snapshot().RawTool("shifty")
		if entry == nil {
			return nil
		}
		var names []string
		for _, m := range entry.Tool.Methods {
			names = append(names, m.Name+"/"+m.MCPName)
		}
		return names
	}
	ctx := testenv.Context(t)

	t.Run("new methods are served before the record names them", func(t *testing.T) {
		b := answer("b_dotted", "b")
		b.MCPName = "b.dotted"
		if err := in.SetMethods(ctx, []workers.Method{answer("a", "second a"), b}); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, "the record has a and b", func() bool {
			return strings.Join(methods(), ",") == "a/,b_dotted/b.dotted"
		})
		for method, want := range map[string]string{"a": `"second a"`, "b_dotted": `"b"`} {
			r, err := call(t, e, "shifty", method, `{}`)
			if err != nil || string(r.Data) != want {
				t.Errorf("%s: got %v %v, want %s", method, err, r, want)
			}
		}
	})
	t.Run("a method dropped from the declaration answers method_not_found", func(t *testing.T) {
		if err := in.SetMethods(ctx, []workers.Method{answer("b_dotted", "b")}); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, "the record has only b", func() bool { return strings.Join(methods(), ",") == "b_dotted/" })
		_, err := call(t, e, "shifty", "a", `{}`)
		var te *wire.ToolError
		if !errors.As(err, &te) || te.Code != workers.CodeMethodNotFound || te.Status != 404 {
			t.Fatalf("got %v, want a method_not_found tool error with status 404", err)
		}
	})
	t.Run("a bad declaration is refused and the served methods stay", func(t *testing.T) {
		err := in.SetMethods(ctx, []workers.Method{answer("b.dotted", "b")})
		if err == nil || !strings.Contains(err.Error(), "method name") {
			t.Fatalf("got %v, want an error about the method name", err)
		}
		if r, err := call(t, e, "shifty", "b_dotted", `{}`); err != nil || string(r.Data) != `"b"` {
			t.Fatalf("b after the refusal: %v %v", err, r)
		}
	})
	t.Run("a stopped worker refuses", func(t *testing.T) {
		if err := in.stop(t); err != nil {
			t.Fatal(err)
		}
		if err := in.SetMethods(ctx, []workers.Method{answer("c", "c")}); err == nil {
			t.Fatal("SetMethods on a stopped worker succeeded")
		}
	})
}

// TestWorkerWaitsForTheRegistry: a worker started before any edge made the registry
// says so in its log and waits; once the registry is there, it serves.
func TestWorkerWaitsForTheRegistry(t *testing.T) {
	srv := testenv.Server(t)
	var logs testenv.Buffer
	w := workers.New(testenv.Conn(t, srv.ClientURL()), greetTool, workers.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	w.Handle(greet())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var stopOnce sync.Once
	stop := func() { // before the edge that answers its asks stops: its drain asks one
		stopOnce.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	testenv.WaitFor(t, "the worker says it waits for the registry", func() bool {
		return strings.Contains(logs.String(), "the registry is not on this NATS system yet")
	})
	select {
	case <-w.Ready():
		t.Fatal("ready without a registry")
	default:
	}

	e := newEnvAt(t, srv.ClientURL())
	select {
	case <-w.Ready():
	case err := <-done:
		t.Fatalf("Run returned %v", err)
	case <-time.After(testenv.Patience):
		t.Fatalf("not ready %v after the registry appeared", testenv.Patience)
	}
	testenv.WaitFor(t, "the tool and its instance in the view", func() bool {
		s := e.view.Snapshot()
		return s.RawTool("greeter") != nil && s.Instances("greeter") == 1
	})
	if r, err := call(t, e, "greeter", "greet", `{"name":"Ada"}`); err != nil || string(r.Data) != `{"greeting":"hello, Ada"}` {
		t.Fatalf("call: %v %v", err, r)
	}
	stop()
}

// TestCallsWithoutAProperReplyAreNotRun: an edge always gives a call a reply subject
// of its own; a call without one, or answered into the server's APIs, is not run, so
// that whatever the handler does and answers never lands where a sender chose.
func TestCallsWithoutAProperReplyAreNotRun(t *testing.T) {
	e := newEnv(t)
	var ran atomic.Int64
	e.start(workers.Tool{ID: "counted"}, []workers.Method{{Name: "run", Handler: func(context.Context, *workers.Call) (any, error) {
		ran.Add(1)
		return "ran", nil
	}}})
	jsAPI, err := e.nc.SubscribeSync("$JS.API.>")
	if err != nil {
		t.Fatal(err)
	}
	for _, reply := range []string{"", "$JS.API.DIRECT.GET.KV_tg-keys.$KV.tg-keys.x", "$KV.tg-keys.x"} {
		if err := e.nc.PublishMsg(&nats.Msg{Subject: "tg.call.counted.run", Reply: reply, Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	// A proper call after them: the worker takes a method's calls in order.
	if r, err := call(t, e, "counted", "run", `{}`); err != nil || string(r.Data) != `"ran"` {
		t.Fatalf("the proper call: %v %v", r, err)
	}
	if n := ran.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want only the proper call's", n)
	}
	if m, err := jsAPI.NextMsg(100 * time.Millisecond); err == nil {
		t.Fatalf("the worker published on %s", m.Subject)
	}
}

// TestWorkerOutlastsARegistryThatCannotWrite: a worker that starts while the registry
// cannot take writes (its cluster lost quorum: the edge answers "failed, try again")
// keeps trying, and serves once the cluster is whole again, rather than exiting.
func TestWorkerOutlastsARegistryThatCannotWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := testenv.NewCluster(t)
	url := c.Servers[0].ClientURL()
	nc := testenv.Conn(t, url)
	store := testenv.Store(t, nc, 3)
	testenv.View(t, store) // the buckets' streams are placed and followed

	c.Stop(1)
	c.Stop(2) // the registry's streams have no quorum: writes fail
	var logs testenv.Buffer
	w := workers.New(testenv.Conn(t, url), greetTool, workers.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	w.Handle(greet())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	testenv.WaitFor(t, "the worker says the registry cannot take its write", func() bool {
		return strings.Contains(logs.String(), "the registry did not take")
	})
	select {
	case err := <-done:
		t.Fatalf("Run returned while the registry could not write: %v", err)
	default:
	}
	c.Start(t, 1)
	c.Start(t, 2)
	select {
	case <-w.Ready():
	case err := <-done:
		t.Fatalf("Run returned %v", err)
	case <-time.After(2 * testenv.Patience):
		t.Fatalf("not ready %v after the cluster was whole again", 2*testenv.Patience)
	}
	view := testenv.View(t, store)
	testenv.WaitFor(t, "the tool and its instance in the view", func() bool {
		s := view.Snapshot()
		return s.RawTool("greeter") != nil && s.Instances("greeter") == 1
	})
}

// TestStateIsNotMissingWhenJetStreamIsNot: an edge that cannot reach JetStream (here a
// NATS system without it) cannot say the tool's state bucket is missing; a worker
// opening its state keeps asking, and gets no ErrNoState, which would stop it for good.
func TestStateIsNotMissingWhenJetStreamIsNot(t *testing.T) {
	srv := testenv.ServerWith(t, func(c *bus.ServerConfig) { c.JetStream = false })
	nc := testenv.Conn(t, srv.ClientURL())
	testenv.Asks(t, nc, wire.DefaultSubjects)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := workers.New(testenv.Conn(t, srv.ClientURL()), greetTool).State(ctx)
	if err == nil || errors.Is(err, workers.ErrNoState) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("State on a NATS system without JetStream: %v, want it still asking when its context ended", err)
	}
}
