package core

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// EventWriter writes Server-Sent Events to one HTTP response. It is safe for
// concurrent use: a call's progress relay and its handler both write.
type EventWriter struct {
	mu      sync.Mutex
	send    func([]byte) error // writes and flushes a piece of the stream
	lastOut time.Time
	err     error
	pending bool // DeferEvents's: nothing is written yet, not even the headers
}

// errTakenOver: the response of a deferred stream was written otherwise.
var errTakenOver = errors.New("sse: the response was answered without a stream")

// setEventHeaders sets the headers of an event stream.
func setEventHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	// Reverse proxies such as nginx buffer responses unless told not to.
	h.Set("X-Accel-Buffering", "no")
}

// StartEvents sends the headers of an event stream and returns its writer.
func StartEvents(w http.ResponseWriter, status int) *EventWriter {
	setEventHeaders(w.Header())
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	// A stream outlives any write timeout the HTTP server applies to responses.
	_ = rc.SetWriteDeadline(time.Time{})
	ew := &EventWriter{send: func(b []byte) error {
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}, lastOut: time.Now()}
	ew.err = rc.Flush()
	return ew
}

// DeferEvents is StartEvents, but for a response that may still be answered
// otherwise: the headers go with the first event (or keep-alive), and until then
// takeOver may claim the response, to answer with a status of its own.
func DeferEvents(w http.ResponseWriter) *EventWriter {
	ew := &EventWriter{lastOut: time.Now(), pending: true}
	var started *EventWriter
	ew.send = func(b []byte) error {
		if started == nil {
			started = StartEvents(w, http.StatusOK)
			ew.pending = false
			if started.err != nil {
				return started.err
			}
		}
		return started.send(b)
	}
	return ew
}

// TakeOver reports whether nothing of a deferred stream was written, and if so
// ends it: the response is the caller's to write.
func (e *EventWriter) TakeOver() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.pending || e.err != nil {
		return false
	}
	e.err = errTakenOver
	return true
}

// detachedWriteTimeout bounds one write to a detached stream: a client that takes
// no event for this long has gone, and its stream must not hold up a stopping edge.
const detachedWriteTimeout = 30 * time.Second

// detachEvents takes a request's connection from the HTTP server and answers the
// request there with the headers of an event stream, chunked. The stream ends with
// the connection: end writes the last chunk and closes it. It fails, and nothing is
// written, where the connection cannot be taken (HTTP/2).
func detachEvents(w http.ResponseWriter) (ew *EventWriter, conn net.Conn, end func(), err error) {
	h := w.Header().Clone()
	setEventHeaders(h)
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	h.Set("Transfer-Encoding", "chunked")
	h.Set("Connection", "close")
	// The request was read whole, and nothing may follow it on a connection its
	// stream holds to the end: the buffers the server hands over are dropped.
	conn, _, err = http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, nil, nil, err
	}
	var head bytes.Buffer
	head.WriteString("HTTP/1.1 200 OK\r\n")
	_ = h.Write(&head)
	head.WriteString("\r\n")
	write := func(b []byte) error {
		_ = conn.SetWriteDeadline(time.Now().Add(detachedWriteTimeout))
		_, err := conn.Write(b)
		return err
	}
	ew = &EventWriter{send: func(b []byte) error {
		chunk := make([]byte, 0, len(b)+20)
		chunk = strconv.AppendInt(chunk, int64(len(b)), 16)
		chunk = append(chunk, "\r\n"...)
		chunk = append(chunk, b...)
		chunk = append(chunk, "\r\n"...)
		return write(chunk)
	}, lastOut: time.Now()}
	ew.err = write(head.Bytes())
	return ew, conn, func() {
		ew.mu.Lock()
		if ew.err == nil {
			_ = write([]byte("0\r\n\r\n"))
		}
		ew.err = net.ErrClosed
		ew.mu.Unlock()
		_ = conn.Close()
	}, nil
}

// Event writes one event. An empty id or name is left out; data may hold newlines.
func (e *EventWriter) Event(id, name string, data []byte) error {
	var b bytes.Buffer
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(bytes.TrimSuffix(line, []byte("\r")))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return e.write(b.Bytes())
}

// EventFrom writes one event whose data write writes, as it goes: a message too large
// to hold (a large tool result). Nothing else is written to the stream meanwhile. Its
// newlines start data lines, as Event's do; a carriage return is left out (in JSON it
// can only be whitespace). A write that fails leaves the event without its end, so
// the client never takes a part of it for the whole.
func (e *EventWriter) EventFrom(id, name string, write func(io.Writer) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return e.err
	}
	head := ""
	if id != "" {
		head = "id: " + id + "\n"
	}
	if name != "" {
		head += "event: " + name + "\n"
	}
	d := &dataLines{e: e, buf: append(make([]byte, 0, 32<<10), head+"data: "...)}
	if err := write(d); err != nil {
		if e.err == nil {
			e.err = err
		}
		return err
	}
	d.buf = append(d.buf, "\n\n"...)
	return d.flush()
}

// dataLines is the writer of an event's data (EventFrom): lines after the first
// begin "data: ", and what it holds goes out in pieces of about 32 KiB.
type dataLines struct {
	e   *EventWriter
	buf []byte
}

func (d *dataLines) Write(p []byte) (int, error) {
	for _, b := range p {
		switch b {
		case '\r':
		case '\n':
			d.buf = append(d.buf, "\ndata: "...)
		default:
			d.buf = append(d.buf, b)
		}
		if len(d.buf) >= 32<<10 {
			if err := d.flush(); err != nil {
				return 0, err
			}
		}
	}
	return len(p), nil
}

// flush sends what d holds; the caller holds e.mu.
func (d *dataLines) flush() error {
	if d.e.err != nil {
		return d.e.err
	}
	d.e.err = d.e.send(d.buf)
	d.e.lastOut = time.Now()
	d.buf = d.buf[:0]
	return d.e.err
}

// Prime writes an event with an id and no data, and the reconnection delay: a client
// that loses the stream after this resumes with Last-Event-ID (SEP-1699).
func (e *EventWriter) Prime(id string, retry time.Duration) error {
	return e.write([]byte("id: " + id + "\nretry: " + strconv.FormatInt(retry.Milliseconds(), 10) + "\ndata: \n\n"))
}

// retry tells the client how long to wait before reconnecting, ahead of a close.
func (e *EventWriter) retry(d time.Duration) error {
	return e.write([]byte("retry: " + strconv.FormatInt(d.Milliseconds(), 10) + "\n\n"))
}

// KeepAlive writes a comment if nothing was written for at least idle.
func (e *EventWriter) KeepAlive(idle time.Duration) error {
	e.mu.Lock()
	quiet := time.Since(e.lastOut) >= idle
	e.mu.Unlock()
	if !quiet {
		return nil
	}
	return e.write([]byte(": keep-alive\n\n"))
}

func (e *EventWriter) write(b []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return e.err
	}
	e.err = e.send(b)
	e.lastOut = time.Now()
	return e.err
}
