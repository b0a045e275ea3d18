package sse

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// eventWriter writes Server-Sent Events to one HTTP response. It is safe for
// concurrent use: a call's progress relay and its handler both write.
type eventWriter struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	lastOut time.Time
	err     error
}

// startEvents sends the headers of an event stream and returns its writer.
func startEvents(w http.ResponseWriter, status int) *eventWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	// Reverse proxies such as nginx buffer responses unless told not to.
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	// A stream outlives any write timeout the HTTP server applies to responses.
	_ = rc.SetWriteDeadline(time.Time{})
	ew := &eventWriter{w: w, rc: rc}
	ew.flush()
	return ew
}

// event writes one event. An empty id or name is left out; data may hold newlines.
func (e *eventWriter) event(id, name string, data []byte) error {
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

// prime writes an event with an id and no data, and the reconnection delay: a client
// that loses the stream after this resumes with Last-Event-ID (SEP-1699).
func (e *eventWriter) prime(id string, retry time.Duration) error {
	return e.write([]byte("id: " + id + "\nretry: " + strconv.FormatInt(retry.Milliseconds(), 10) + "\ndata: \n\n"))
}

// retry tells the client how long to wait before reconnecting, ahead of a close.
func (e *eventWriter) retry(d time.Duration) error {
	return e.write([]byte("retry: " + strconv.FormatInt(d.Milliseconds(), 10) + "\n\n"))
}

// keepAlive writes a comment if nothing was written for at least idle.
func (e *eventWriter) keepAlive(idle time.Duration) error {
	e.mu.Lock()
	quiet := time.Since(e.lastOut) >= idle
	e.mu.Unlock()
	if !quiet {
		return nil
	}
	return e.write([]byte(": keep-alive\n\n"))
}

func (e *eventWriter) write(b []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return e.err
	}
	if _, err := e.w.Write(b); err != nil {
		e.err = err
		return err
	}
	e.lastOut = time.Now()
	if err := e.rc.Flush(); err != nil {
		e.err = err
	}
	return e.err
}

func (e *eventWriter) flush() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lastOut = time.Now()
	if err := e.rc.Flush(); err != nil {
		e.err = err
	}
}
