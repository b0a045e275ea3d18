package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/jsonscan"
	"github.com/toolgate/toolgate/payloads"
	"github.com/toolgate/toolgate/registry"
)

// A POSTed message past one bus message is read as it arrives: its envelope (jsonrpc,
// id, method, the params but for their arguments) into memory, and a tools/call's
// arguments, the part that is large, into the payloads bucket, checked on the way as
// part of the one JSON object the message must be and held to the account's payload
// limit. The call then names the payload, as a REST call's large body does
// (gateway.Call.Payload), and the edge never holds the arguments whole. A message
// whose large part is anything else (a client's response, another method's params, a
// batch) is held whole under the message's bound, as before.

// argsPath is where a tools/call carries what may be large.
var argsPath = []string{"params", "arguments"}

// Posted is a POSTed message as ReadMessage read it.
type Posted struct {
	Raw []byte
	Msg jsonrpc.Message
	// Args are a tools/call's arguments past one message, stored as they arrived;
	// Raw and Msg hold {} in their place. Handle removes them once the call is over;
	// a request that does not reach it must Release them.
	Args *StoredArgs
}

// StoredArgs are a tools/call's arguments in the payloads bucket (or, past the
// account's limit, the failure that nothing was stored).
type StoredArgs struct {
	store   *payloads.Store
	tool    string
	p       wire.Payload
	err     error  // past the account's limit: payload_too_large, nothing stored
	env     []byte // the message as read, {} in the arguments' place
	at      int    // where that {} is
	claimed atomic.Bool
}

// claim makes the arguments the caller's to remove, unless someone claimed them first.
func (a *StoredArgs) claim() bool { return a != nil && a.claimed.CompareAndSwap(false, true) }

// Release removes the arguments of a request that was not handled (refused before).
func (a *StoredArgs) Release() {
	if a.claim() {
		a.remove()
	}
}

func (a *StoredArgs) remove() {
	if a.err == nil {
		a.store.Delete(context.Background(), a.tool, a.p)
	}
}

// whole is the message with its arguments put back, read from the bucket: for what
// needs them in memory (another method's params, a task's record).
func (a *StoredArgs) whole(ctx context.Context) ([]byte, error) {
	if a.err != nil {
		return nil, a.err
	}
	args, err := a.store.Read(ctx, a.tool, a.p)
	if err != nil {
		return nil, fmt.Errorf("sse: reading a call's arguments: %w", err)
	}
	msg := make([]byte, 0, len(a.env)+len(args))
	return append(append(append(msg, a.env[:a.at]...), args...), a.env[a.at+2:]...), nil
}

// readLarge reads the rest of a message whose first bytes, head, are past one bus
// message: the envelope it returns, and the arguments stored, when it has some.
func (s *Server) readLarge(ctx context.Context, head []byte, body io.Reader, p registry.Principal, tool string) ([]byte, *StoredArgs, error) {
	limit := s.gw.PayloadLimit(p.Account)
	aw := &argsWriter{store: s.gw.Payloads(), ctx: ctx, tool: tool, limit: limit}
	var env bytes.Buffer
	d := jsonscan.Divert{Path: argsPath, Value: aw, Rest: &env}
	_, err := d.Write(head)
	if err == nil {
		// A small step: a caller who trickles a body it declared large holds little.
		_, err = io.CopyBuffer(&d, body, make([]byte, 8<<10))
	}
	if err == nil {
		err = d.Close()
	}
	if !d.Diverted() {
		return env.Bytes(), nil, err
	}
	stored, serr := aw.finish(err) // a failure here leaves nothing stored
	if err != nil {
		return nil, nil, err
	}
	a := &StoredArgs{store: aw.store, tool: tool, p: stored, env: env.Bytes(), at: int(d.At())}
	switch {
	case errors.Is(serr, payloads.ErrTooLarge):
		a.err = gateway.TooLarge("request", aw.n, limit)
	case serr != nil:
		return nil, nil, fmt.Errorf("%w: %w", errArgsStore, serr)
	}
	return env.Bytes(), a, nil
}

// argsWriter passes a tools/call's arguments to the payloads bucket as they are read:
// the bucket's writer reads them from a pipe, one part at a time, from the first
// byte on. Past the limit it stops reading; what comes after is counted and dropped.
type argsWriter struct {
	store *payloads.Store
	ctx   context.Context
	tool  string
	limit int64

	n       int64 // bytes of the arguments
	pw      *io.PipeWriter
	done    chan storedArgs
	stopped bool
}

type storedArgs struct {
	p   wire.Payload
	err error
}

func (w *argsWriter) Write(b []byte) (int, error) {
	if w.pw == nil {
		pr, pw := io.Pipe()
		w.pw, w.done = pw, make(chan storedArgs, 1)
		go func() {
			p, err := w.store.Write(w.ctx, w.tool, nil, pr, w.limit)
			pr.CloseWithError(io.ErrClosedPipe) // the writer stopped: nothing more is taken
			w.done <- storedArgs{p, err}
		}()
	}
	w.n += int64(len(b))
	if !w.stopped {
		_, err := w.pw.Write(b)
		w.stopped = err != nil
	}
	return len(b), nil
}

// finish ends the arguments, whole when err is nil, and returns what was stored; with
// a failure, the bucket's writer removes what it stored.
func (w *argsWriter) finish(err error) (wire.Payload, error) {
	_ = w.pw.CloseWithError(err)
	res := <-w.done
	return res.p, res.err
}

// errArgsStore is the payloads bucket's failure to store a call's arguments.
var errArgsStore = errors.New("sse: the payloads bucket did not store the call's arguments")

// readFailure answers a message that could not be read.
func (s *Server) readFailure(w http.ResponseWriter, err error) {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		s.Refuse(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("message exceeds %d bytes", tooLarge.Limit))
	case errors.Is(err, jsonscan.ErrNotObject), errors.Is(err, jsonscan.ErrDivertedTwice):
		WriteRPCError(w, jsonrpc.ID{}, parseError("Parse error: not a JSON-RPC 2.0 message: %v", err))
	case errors.As(err, new(*gateway.Error)): // past the account's payload limit
		WriteRPCError(w, jsonrpc.ID{}, err)
	case errors.Is(err, errArgsStore):
		s.Refuse(w, http.StatusServiceUnavailable, "the call's arguments could not be stored; retry")
	default:
		s.Refuse(w, http.StatusBadRequest, "reading the message: "+err.Error())
	}
}

// errArgsGone is a tools/call whose stored arguments were removed before it ran: its
// request ended first.
var errArgsGone = errors.New("sse: the call's arguments were removed: its request ended before it ran")

// HoldArgs puts r's stored arguments back into its message, for a path that needs
// them whole (a task's record, a task-augmented call forwarded as the client sent
// it, a 2026-07-28 call whose headers repeat some). Whoever held r.Args still
// removes them from the bucket.
func (s *Server) HoldArgs(ctx context.Context, r *Request) error {
	raw, err := r.Args.whole(ctx)
	if err != nil {
		return err
	}
	msg, err := decodeMessage(raw)
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok {
		return fmt.Errorf("sse: a call's message with its arguments: %v", err)
	}
	r.RPC, r.call, r.callErr, r.Args = req, nil, nil, nil
	return nil
}
