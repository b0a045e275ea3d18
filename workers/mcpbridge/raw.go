package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The SDK decodes a server's results into its own types, which drop what they do not
// know (a tool's execution, the tasks capability) and what they leave out when empty
// (an argument's "required": false, a completion's "hasMore": false). The client
// must get the result as the server sent it, so the bridge keeps the raw result of
// the requests it forwards: a request made with a context from withRaw is matched,
// by its JSON-RPC id, to the response the connection reads (see observe), whose
// result the sink then holds when the SDK's call returns.

type rawKey struct{}

// rawSink receives the raw result of the request made with its context (the last,
// when several are).
type rawSink struct {
	mu     sync.Mutex
	result json.RawMessage
}

// withRaw returns a context whose next request's raw result sink gets.
func withRaw(ctx context.Context) (context.Context, *rawSink) {
	sink := &rawSink{}
	return context.WithValue(ctx, rawKey{}, sink), sink
}

// raw is the result the server sent, or nil when it was not seen.
func (k *rawSink) raw() json.RawMessage {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.result
}

// rawWaits are the requests of one connection whose raw results are wanted, by id.
type rawWaits struct {
	mu   sync.Mutex
	byID map[string]*rawSink
}

func idKey(id jsonrpc.ID) string { return fmt.Sprintf("%T:%v", id.Raw(), id.Raw()) }

// sent notes a request written with ctx: if ctx wants its raw result, its id is
// awaited.
func (w *rawWaits) sent(ctx context.Context, msg jsonrpc.Message) {
	sink, _ := ctx.Value(rawKey{}).(*rawSink)
	req, ok := msg.(*jsonrpc.Request)
	if sink == nil || !ok || !req.IsCall() {
		return
	}
	// A call the SDK makes again (a multi-round-trip result fulfilled) ends with the
	// last request's result.
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byID == nil {
		w.byID = map[string]*rawSink{}
	}
	w.byID[idKey(req.ID)] = sink
}

// received hands a response to the sink awaiting it.
func (w *rawWaits) received(resp *jsonrpc.Response) {
	w.mu.Lock()
	sink := w.byID[idKey(resp.ID)]
	delete(w.byID, idKey(resp.ID))
	w.mu.Unlock()
	if sink == nil || resp.Error != nil || len(resp.Result) == 0 {
		return
	}
	sink.mu.Lock()
	sink.result = append(json.RawMessage(nil), resp.Result...)
	sink.mu.Unlock()
}

// forget drops what a request made with ctx awaited, once its call returned.
func (w *rawWaits) forget(sink *rawSink) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, s := range w.byID {
		if s == sink {
			delete(w.byID, id)
		}
	}
}

// jsonTee shows see the JSON-RPC message of a JSON response body once it is read
// whole, before the reader gets its end.
type jsonTee struct {
	io.ReadCloser
	see  func(jsonrpc.Message)
	data []byte
	done bool
}

func (t *jsonTee) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if len(t.data)+n <= maxEvent {
		t.data = append(t.data, p[:n]...)
	} else {
		t.done = true // too large to keep: not looked at
	}
	if err == io.EOF && !t.done {
		t.done = true
		if msg, derr := jsonrpc.DecodeMessage(t.data); derr == nil {
			t.see(msg)
		}
	}
	return n, err
}
