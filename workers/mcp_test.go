package workers_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/micro"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/workers"
)

func TestMCPRequests(t *testing.T) {
	e := newEnv(t)
	seen := make(chan *workers.Call, 1)
	tool := workers.Tool{ID: "library", Capabilities: workers.Capabilities{Resources: true, Prompts: true}}
	e.startWith(tool, []workers.Method{greet()}, func(w *workers.Worker) {
		w.HandleMCP(func(ctx context.Context, c *workers.Call, method string) (any, error) {
			seen <- c
			switch method {
			case "resources/read":
				var p struct {
					URI string `json:"uri"`
				}
				if err := c.Bind(&p); err != nil {
					return nil, err
				}
				if p.URI != "book://1" {
					return nil, &workers.RPCError{Code: -32002, Message: "resource not found", Data: json.RawMessage(`{"uri":"` + p.URI + `"}`)}
				}
				return map[string]any{"contents": []map[string]string{{"uri": p.URI, "text": "Once upon a time"}}}, nil
			case "resources/subscribe":
				return nil, nil
			}
			return nil, &workers.RPCError{Code: workers.RPCMethodNotFound, Message: "no method " + method}
		})
	})
	ask := func(t *testing.T, method, params string) (*wire.Reply, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
		defer cancel()
		return bus.Do(ctx, e.nc, wire.DefaultSubjects, &wire.Request{
			Tool: "library", MCP: true, Method: method, CallID: "m-" + method, RequestID: "m-" + method,
			Account: "acme", Data: []byte(params), MCPContext: wire.MCPContext{Session: "s-1"},
		})
	}

	t.Run("the handler gets the MCP method and params and its result is the reply", func(t *testing.T) {
		r, err := ask(t, "resources/read", `{"uri":"book://1"}`)
		if err != nil {
			t.Fatal(err)
		}
		if r.ContentType != "application/json" || string(r.Data) != `{"contents":[{"text":"Once upon a time","uri":"book://1"}]}` {
			t.Errorf("reply %q %s", r.ContentType, r.Data)
		}
		c := <-seen
		if c.Method != "resources/read" || c.Tool != "library" || c.Account != "acme" || c.Session != "s-1" {
			t.Errorf("call: method %q tool %q account %q session %q", c.Method, c.Tool, c.Account, c.Session)
		}
	})
	t.Run("a nil result is an empty object", func(t *testing.T) {
		r, err := ask(t, "resources/subscribe", `{"uri":"book://1"}`)
		<-seen
		if err != nil || string(r.Data) != `{}` {
			t.Fatalf("got %v %v", err, r)
		}
	})
	for _, tt := range []struct {
		name, method, params string
		code                 int64
		message, data        string
	}{
		{"an RPCError carries its code, message and data", "resources/read", `{"uri":"book://2"}`, -32002, "resource not found", `{"uri":"book://2"}`},
		{"an unknown method is method not found", "tools/list", `{}`, workers.RPCMethodNotFound, "no method tools/list", ""},
		{"params that do not decode are invalid params", "resources/read", `{"uri":7}`, workers.RPCInvalidParams, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ask(t, tt.method, tt.params)
			<-seen
			var re *workers.RPCError
			if !errors.As(err, &re) {
				t.Fatalf("got %v, want a JSON-RPC error", err)
			}
			if re.Code != tt.code || (tt.message != "" && re.Message != tt.message) || string(re.Data) != tt.data {
				t.Errorf("error %d %q %s, want %d %q %s", re.Code, re.Message, re.Data, tt.code, tt.message, tt.data)
			}
		})
	}
	t.Run("the MCP subject is an endpoint in the tool's queue group", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
		defer cancel()
		msg, err := e.nc.RequestWithContext(ctx, "$SRV.INFO.library", nil)
		if err != nil {
			t.Fatal(err)
		}
		var info micro.Info
		if err := json.Unmarshal(msg.Data, &info); err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, ep := range info.Endpoints {
			if ep.Subject == "tg.mcp.library" {
				found = ep.QueueGroup == "tg.library"
			}
		}
		if !found {
			t.Errorf("endpoints %+v: no tg.mcp.library in queue group tg.library", info.Endpoints)
		}
	})
}
