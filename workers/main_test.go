package workers_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
)

// spans records every span the package's tests make. The provider is global because
// bus.Do, like the edge, traces through otel's global provider; it can be set once.
var spans = tracetest.NewSpanRecorder()

func TestMain(m *testing.M) {
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	os.Exit(m.Run())
}

// env is one NATS server with the registry on it, and a caller's connection.
type env struct {
	t     testing.TB
	url   string
	nc    *nats.Conn
	store *registry.Store
	view  *registry.View
}

func newEnv(t testing.TB) *env {
	t.Helper()
	srv := testenv.Server(t)
	return newEnvAt(t, srv.ClientURL())
}

func newEnvAt(t testing.TB, url string) *env {
	t.Helper()
	nc := testenv.Conn(t, url)
	store := testenv.Store(t, nc, 1)
	return &env{t: t, url: url, nc: nc, store: store, view: testenv.View(t, store)}
}

// instance is one running worker, on its own connection as a worker process would be.
type instance struct {
	*workers.Worker
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan error
}

// start runs a worker of tool with methods on a connection of its own and returns
// once it serves.
func (e *env) start(tool workers.Tool, methods []workers.Method, opts ...workers.Option) *instance {
	e.t.Helper()
	return e.startWith(tool, methods, func(*workers.Worker) {}, opts...)
}

// startWith is start with a chance to declare more (an MCP handler) before Run.
func (e *env) startWith(tool workers.Tool, methods []workers.Method, declare func(*workers.Worker), opts ...workers.Option) *instance {
	e.t.Helper()
	nc := testenv.Conn(e.t, e.url)
	opts = append([]workers.Option{workers.WithLogger(testenv.Logger(e.t))}, opts...)
	w := workers.New(nc, tool, opts...)
	for _, m := range methods {
		w.Handle(m)
	}
	declare(w)
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{Worker: w, nc: nc, cancel: cancel, done: make(chan error, 1)}
	go func() { in.done <- w.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		select {
		case <-in.done:
		case <-time.After(testenv.Patience):
			e.t.Errorf("worker %s did not stop within %v", w.Instance(), testenv.Patience)
		}
	})
	select {
	case <-w.Ready():
	case err := <-in.done:
		e.t.Fatalf("worker did not start: %v", err)
	case <-time.After(testenv.Patience):
		e.t.Fatalf("worker not ready within %v", testenv.Patience)
	}
	return in
}

// stop cancels the worker's context and returns what Run returned.
func (in *instance) stop(t *testing.T) error {
	t.Helper()
	in.cancel()
	select {
	case err := <-in.done:
		in.done <- err // for the cleanup
		return err
	case <-time.After(testenv.Patience):
		t.Fatalf("worker did not stop within %v", testenv.Patience)
		return nil
	}
}
