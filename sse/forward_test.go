package sse_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
)

// A request a link forwards to the tool's workers (resources, prompts, completion)
// takes the gateway's path as a tools/call does: it spends the caller's rate, and one
// over it is refused before it reaches a worker.
func TestForwardedRequestsSpendTheRate(t *testing.T) {
	srv := testenv.Server(t)
	url := srv.ClientURL()
	nc := testenv.Conn(t, url)
	store := testenv.Store(t, nc, 1)
	ctx := testenv.Context(t)
	// Two requests, then nothing for about 17 minutes.
	if _, err := store.CreateAccount(ctx, registry.Account{ID: "shelf", Limits: registry.Limits{Rate: 0.001, Burst: 2}}); err != nil {
		t.Fatal(err)
	}

	var reads, calls atomic.Int64
	w := workers.New(testenv.Conn(t, url), workers.Tool{ID: "library", Version: "1.0.0", Capabilities: workers.Capabilities{Resources: true}},
		workers.WithLogger(testenv.Logger(t)))
	w.Handle(workers.Func("echo", "Echoes its text", func(_ context.Context, _ *workers.Call, in struct {
		Text string `json:"text"`
	}) (string, error) {
		calls.Add(1)
		return in.Text, nil
	}))
	w.HandleMCP(func(_ context.Context, c *workers.Call, method string) (any, error) {
		if method != "resources/read" {
			return nil, &workers.RPCError{Code: workers.RPCMethodNotFound, Message: "no method " + method}
		}
		reads.Add(1)
		return map[string]any{"contents": []map[string]string{{"uri": "book://1", "text": "Once upon a time"}}}, nil
	})
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx); close(done) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the worker did not stop within 10s")
		}
	})
	select {
	case <-w.Ready():
	case err := <-done:
		t.Fatalf("worker: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("worker not ready within 10s")
	}

	signer := testenv.LinkSigner(t)
	conn, err := store.Connect(ctx, "shelf", "library", signer)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, urls: []string{url}, replicas: 1, store: store, link: signer.Token("shelf", "library", conn.LinkNonce)}
	ed := e.startEdge(t, 0, nil)
	cs := connectGoSDK(t, &mcp.StreamableClientTransport{Endpoint: e.streamableURL(ed.url)}, "", newSeen())
	read := func() (*mcp.ReadResourceResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return cs.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "book://1"})
	}
	for i := range 2 {
		res, err := read()
		if err != nil {
			t.Fatalf("read %d, within the burst: %v", i+1, err)
		}
		if len(res.Contents) != 1 || res.Contents[0].Text != "Once upon a time" {
			t.Fatalf("read %d: %+v", i+1, res.Contents)
		}
	}

	_, err = read()
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) {
		t.Fatalf("a read over the rate: got %v, want a JSON-RPC error", err)
	}
	if rpcErr.Code != -32029 || !strings.HasPrefix(rpcErr.Message, "too many calls: slow down: retry after ") || !strings.Contains(string(rpcErr.Data), `"retryAfterMs":`) {
		t.Errorf("a read over the rate: error %d %q %s", rpcErr.Code, rpcErr.Message, rpcErr.Data)
	}
	if n := reads.Load(); n != 2 {
		t.Errorf("the worker answered %d reads, want the 2 within the rate", n)
	}

	// tools/call spends the same bucket and says the same of it, as its result.
	res, err := cs.call(ctx, "echo", map[string]any{"text": "hi"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.isError || !strings.HasPrefix(res.text, "echo: too many calls: slow down: retry after ") {
		t.Errorf("a call over the rate: %+v", res)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the worker ran %d calls over the rate", n)
	}
}
