package edge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/jsonscan"
	"github.com/toolgate/toolgate/payloads"
)

// A tool call's body past one NATS message goes from the HTTP client to the payloads
// bucket as it arrives, and a reply that names a payload goes from the bucket to the
// client, one part at a time (package payloads): the edge never holds either whole.
// A small call takes the path it always took: its body in one buffer, its reply in
// one message.

// DefaultMaxPayloadBytes is Config.MaxPayloadBytes by default.
const DefaultMaxPayloadBytes = wire.DefaultPayloadLimit

// callRoutes are the routes whose bodies are calls' requests (an MCP message may be a
// tools/call), bounded by the payload limit rather than MaxBodyBytes.
var callRoutes = map[string]bool{
	"/tool-call/:tool/:method":  true,
	"/tools/:tool/:method":      true,
	"/mcp/:link":                true,
	"/mcp/:link/messages":       true,
	"/tools/:tool/mcp":          true,
	"/tools/:tool/sse/messages": true,
}

// bodyLimit is the largest body the request's route takes.
func (e *Edge) bodyLimit(c *gin.Context) int64 {
	if callRoutes[c.FullPath()] {
		return e.maxPayload
	}
	return e.maxBody
}

// readParams reads a call's body: whole into buf when it fits one message, otherwise
// into the payloads bucket as it arrives (call.Payload), which the caller removes
// once the call is over, checked on the way to be one JSON object (invalid_json
// otherwise; its schema is the tool's to check, as it would need the body whole). A
// body past the account's limit is payload_too_large.
func (e *Edge) readParams(c *gin.Context, call *gateway.Call, buf *bytes.Buffer, async bool) error {
	store := e.gw.Payloads()
	if store == nil || async {
		// A call that outlives its request runs after the request is gone: its
		// params travel whole (the gateway stores them when they are large).
		return e.readWhole(c, call, buf)
	}
	limit := e.gw.PayloadLimit(call.Principal.Account)
	if c.Request.ContentLength > limit {
		return gateway.TooLarge("request", c.Request.ContentLength, limit)
	}
	threshold := wire.PayloadThreshold(e.gw.Conn().MaxPayload())
	if err := readBodyUpTo(buf, c.Request, threshold+1); err != nil {
		return err
	}
	call.Params = buf.Bytes()
	if int64(buf.Len()) > limit { // an account's limit below one message
		return gateway.TooLarge("request", int64(buf.Len()), limit)
	}
	if int64(buf.Len()) <= threshold {
		return nil
	}
	// Checked as it arrives: one JSON object in UTF-8, as a small body is.
	var check jsonscan.ObjectChecker
	_, _ = check.Write(buf.Bytes())
	p, err := store.Write(c.Request.Context(), call.Tool, buf.Bytes(), io.TeeReader(c.Request.Body, &check), limit)
	var re *payloads.ReadError
	switch {
	case errors.Is(err, payloads.ErrTooLarge):
		return gateway.TooLarge("request", limit+1, limit)
	case errors.Is(err, jsonscan.ErrNotObject):
		return gateway.ErrInvalidJSON
	case errors.As(err, &re):
		return bodyError(re.Err)
	case err != nil:
		return err
	}
	if check.Close() != nil {
		store.Delete(context.WithoutCancel(c.Request.Context()), call.Tool, p)
		return gateway.ErrInvalidJSON
	}
	call.Params, call.Payload = nil, &p
	return nil
}

// readWhole reads a call's body into buf, within the account's limit.
func (e *Edge) readWhole(c *gin.Context, call *gateway.Call, buf *bytes.Buffer) error {
	if err := readBody(buf, c.Request); err != nil {
		return err
	}
	if limit := e.gw.PayloadLimit(call.Principal.Account); int64(buf.Len()) > limit {
		return gateway.TooLarge("request", int64(buf.Len()), limit)
	}
	call.Params = buf.Bytes()
	return nil
}

// writePayloadAnswer answers with a tool's reply whose bytes are the payload p,
// streamed from the bucket, and removes the payload. A part that cannot be read once
// the answer has begun cuts the connection: the client sees a short body, never a
// wrong one.
func (e *Edge) writePayloadAnswer(c *gin.Context, call *gateway.Call, reply *wire.Reply) {
	p := *reply.Payload
	store := e.gw.Payloads()
	defer store.Delete(context.WithoutCancel(c.Request.Context()), call.Tool, p)
	w := c.Writer
	toolAnswerHeaders(w.Header(), reply.ContentType)
	w.Header()["Content-Length"] = []string{strconv.FormatInt(p.Size, 10)}
	w.WriteHeader(reply.Status)
	if err := store.WriteTo(c.Request.Context(), w, call.Tool, p); err != nil {
		e.log.Warn("a reply's payload not sent whole", "tool", call.Tool, "request_id", call.RequestID, "err", err)
		panic(http.ErrAbortHandler)
	}
}
