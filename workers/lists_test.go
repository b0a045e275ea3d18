package workers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/workers"
)

// TestMethodAnswersWithAJSONRPCError: a method's handler that returns an *RPCError
// is answered with that JSON-RPC error, code, message and data, not a tool error.
func TestMethodAnswersWithAJSONRPCError(t *testing.T) {
	e := newEnv(t)
	refuse := workers.Method{Name: "refuse", Handler: func(context.Context, *workers.Call) (any, error) {
		return nil, &workers.RPCError{Code: -32021, Message: "Missing required client capability: sampling",
			Data: []byte(`{"requiredCapabilities":{"sampling":{}}}`)}
	}}
	e.start(workers.Tool{ID: "refuser"}, []workers.Method{refuse})
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	_, err := bus.Do(ctx, e.nc, wire.DefaultSubjects, &wire.Request{Tool: "refuser", Method: "refuse", CallID: "c1", RequestID: "c1", Data: []byte(`{}`)})
	var re *wire.RPCError
	if !errors.As(err, &re) || re.Code != -32021 || re.Message != "Missing required client capability: sampling" ||
		string(re.Data) != `{"requiredCapabilities":{"sampling":{}}}` {
		t.Fatalf("got %v (%#v), want the handler's JSON-RPC error", err, re)
	}
}

// TestListChangedTellsTheEdges: ListChanged publishes the list's name on the tool's
// ListChanged subject; a list that is none of tools, prompts and resources is refused
// and publishes nothing.
func TestListChangedTellsTheEdges(t *testing.T) {
	e := newEnv(t)
	w := e.start(workers.Tool{ID: "lister"}, nil)
	heard := make(chan *nats.Msg, 8)
	sub, err := e.nc.ChanSubscribe(wire.DefaultSubjects.ListChangedAll(), heard)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.ListChanged("roots"); err == nil {
		t.Fatal("a list change of roots was taken")
	}
	if err := w.ListChanged(wire.ListPrompts); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-heard:
		tool, list, ok := wire.DefaultSubjects.ParseListChanged(m.Subject, m.Data)
		if !ok || tool != "lister" || list != wire.ListPrompts {
			t.Fatalf("heard %s %q", m.Subject, m.Data)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("no list change was published")
	}
	if len(heard) != 0 {
		t.Fatalf("%d more messages: the refused change was published", len(heard))
	}
}
