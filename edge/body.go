package edge

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/toolgate/toolgate/gateway"
)

// A request's declared length is a claim, not bytes: the edge holds what has arrived
// of a body and a bounded step more, and an answer given before the body arrived whole
// (a key, a link or a form refused) closes the connection at once instead of waiting
// for the rest. So a caller who declares large bodies and trickles them costs the edge
// little memory, and one refused keeps no connection open.

// limitBody caps every request body at the edge's limit: a declared length over it is
// refused at once, an undeclared one fails when the reader passes it. The body must
// also arrive within ReadBodyTimeout (see requestBody), and an answer begun before it
// was read to its end closes the connection (earlyAnswer).
func (e *Edge) limitBody(c *gin.Context) {
	body := c.Request.Body
	if body == nil || body == http.NoBody {
		c.Next()
		return
	}
	rb := &requestBody{ReadCloser: body, left: c.Request.ContentLength}
	w := &earlyAnswer{ResponseWriter: c.Writer, body: rb}
	c.Writer = w
	limit := e.bodyLimit(c)
	if c.Request.ContentLength > limit {
		tellTooLarge(w)
		e.fail(c, errPayloadTooLarge)
		return
	}
	rb.timed = http.NewResponseController(w).SetReadDeadline(time.Now().Add(e.cfg.ReadBodyTimeout)) == nil
	c.Request.Body = http.MaxBytesReader(netHTTPWriter(w), rb, limit)
	c.Next()
	w.decide() // a handler that wrote nothing: gin answers for it after this
}

// netHTTPWriter is the ResponseWriter net/http made for the request, under gin's and
// the edge's own. http.MaxBytesReader tells only that one when a body passes its
// limit, and then the server, once it has answered 413, closes its side for writing
// and waits half a second before closing the connection. Told nothing, it closed at
// once with the body's last bytes unread, and the reset that sent could reach a
// client still writing them before it read the 413: the client saw a broken pipe,
// not the answer.
func netHTTPWriter(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}

// tellTooLarge tells net/http, as http.MaxBytesReader does (see netHTTPWriter), that
// the request's body is over the limit, for a body refused by its declared length
// before any of it is read. The one way to tell it is a read past a MaxBytesReader's
// limit: here a read of one byte, limit none, from a reader of its own, so the body
// the client is still sending is not touched.
func tellTooLarge(w http.ResponseWriter) {
	_, _ = http.MaxBytesReader(netHTTPWriter(w), io.NopCloser(strings.NewReader("x")), 0).Read(make([]byte, 1))
}

// errBodyTimeout is a body that was still arriving when its time ran out.
var errBodyTimeout = newHTTPError(gateway.KindRequestTimeout, "")

// requestBody is a request's body as its handler reads it. The connection's read
// deadline is set when the request is routed (timed: HTTP/1 connections have one): a
// client that trickles its body is cut off at the deadline, its handler reads
// errBodyTimeout, and the server closes the connection after the answer. Once the body
// has been read to its end, net/http lifts the deadline itself (it goes on reading the
// connection while the handler runs, to learn when the client leaves), so a call or
// stream that outlasts it is not cut off.
type requestBody struct {
	io.ReadCloser
	left  int64 // what is still to come of a declared length; -1 for a chunked body
	whole bool  // read to its end
	timed bool
}

func (b *requestBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
		b.whole = b.left <= 0
	}
	if err == io.EOF {
		b.whole = true
	}
	if err != nil && b.timed && errors.Is(err, os.ErrDeadlineExceeded) {
		return n, errBodyTimeout
	}
	return n, err
}

// earlyAnswer is the response to a request with a body. When its headers go out
// before the body was read to its end, the answer says Connection: close and the
// connection's read deadline is moved to now: net/http would otherwise read what is
// left of a small body (up to 256 KiB) before it replies or closes, waiting on a
// caller who trickles it until the body's timeout.
type earlyAnswer struct {
	gin.ResponseWriter
	body    *requestBody
	decided bool
}

func (w *earlyAnswer) decide() {
	if w.decided {
		return
	}
	w.decided = true
	if w.body.whole || w.ResponseWriter.Written() {
		return
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w.ResponseWriter).SetReadDeadline(time.Now())
}

func (w *earlyAnswer) WriteHeaderNow() {
	w.decide()
	w.ResponseWriter.WriteHeaderNow()
}

func (w *earlyAnswer) Write(b []byte) (int, error) {
	w.decide()
	return w.ResponseWriter.Write(b)
}

func (w *earlyAnswer) WriteString(s string) (int, error) {
	w.decide()
	return w.ResponseWriter.WriteString(s)
}

func (w *earlyAnswer) Flush() {
	w.decide()
	w.ResponseWriter.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *earlyAnswer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// bodyStep bounds how far a body's buffer grows ahead of the bytes that arrived: a
// body declared larger gets a buffer of this size, grown as more arrives.
const bodyStep = 16 << 10

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putBody returns a body buffer to the pool unless it grew large: one huge request
// should not pin its memory for ever.
func putBody(b *bytes.Buffer) {
	if b.Cap() > 64<<10 {
		return
	}
	b.Reset()
	bodyPool.Put(b)
}

// readBody reads the (already capped) request body into buf, which grows only as the
// bytes arrive (bytes.Buffer doubles it), never to a declared length up front.
func readBody(buf *bytes.Buffer, r *http.Request) error {
	return readBodyUpTo(buf, r, -1)
}

// readBodyUpTo is readBody reading at most n bytes (n < 0: all of it), leaving the
// rest of the body to be read from r.Body.
func readBodyUpTo(buf *bytes.Buffer, r *http.Request, n int64) error {
	if r.Body == nil {
		return nil
	}
	if r.ContentLength > 0 {
		buf.Grow(int(min(r.ContentLength, bodyStep)))
	}
	var body io.Reader = r.Body
	if n >= 0 {
		body = io.LimitReader(r.Body, n)
	}
	_, err := buf.ReadFrom(body)
	return bodyError(err)
}

// bodyError is the failure to read a body as the caller is told it.
func bodyError(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return nil // before the targets below, which escape: two allocations per request
	}
	var (
		tooLarge *http.MaxBytesError
		he       *gateway.Error
	)
	if errors.As(err, &tooLarge) || errors.As(err, &he) {
		return err
	}
	return newHTTPError(gateway.KindInvalidRequest, "the body could not be read")
}
