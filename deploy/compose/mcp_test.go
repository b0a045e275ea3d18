package compose

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// mcpSession is an MCP client on the HTTP+SSE transport (2024-11-05), whose session
// is its GET stream: every answer to the requests it POSTs comes back on that stream,
// through the gateway's event log. So a stream that breaks and resumes with
// Last-Event-ID, on either edge, must deliver every answer exactly once: the session
// misses nothing. It counts its requests as the HTTP loads count their calls.
type mcpSession struct {
	tally
	link  string             // the echo tool's link path: /mcp/tgl_.../sse
	edges []string           // the edges' base URLs
	post  func(i int) string // the edge request i is POSTed to
	retry bool               // a POST that met a connection error is sent again to the other edge

	mu         sync.Mutex
	session    string // the session id the first stream named
	changed    []string
	endpoint   string // where to POST, relative to an edge
	lastID     string // the last event id seen
	streamOn   int    // index in edges of the edge the stream is (re)opened on
	streams    []string
	pending    map[int]time.Time // request id -> when it was POSTed
	answered   map[int]bool
	duplicates int
	rpcErrors  []string
	ready      chan struct{} // closed once the first stream named its endpoint
}

func newMCPSession(link string, edges []string, streamOn int, post func(int) string) *mcpSession {
	return &mcpSession{link: link, edges: edges, post: post, streamOn: streamOn,
		pending: map[int]time.Time{}, answered: map[int]bool{}, ready: make(chan struct{})}
}

// streamClient has no timeout: a stream lives until the test ends it or its edge dies.
var streamClient = &http.Client{}

// run holds the stream (reopening it on the other edge when it breaks) and POSTs a
// tools/call every every until stop; then it waits for the answers still due.
func (m *mcpSession) run(stop <-chan struct{}, every time.Duration) error {
	ctx, cancel := context.WithCancel(context.Background())
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		for ctx.Err() == nil {
			m.mu.Lock()
			edge := m.edges[m.streamOn]
			m.mu.Unlock()
			m.hold(ctx, edge)
			if ctx.Err() != nil {
				return
			}
			m.mu.Lock()
			m.streamOn = (m.streamOn + 1) % len(m.edges) // the client fails over to the other edge
			m.mu.Unlock()
			time.Sleep(200 * time.Millisecond)
		}
	}()
	defer func() {
		cancel()
		<-streamDone
	}()
	select {
	case <-m.ready:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("mcp: the stream named no endpoint within 30s (streams %v)", m.streams)
	}
	if err := m.send(0, m.edges[0], `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"compose-test","version":"1"}}}`); err != nil {
		return err
	}
	if !until(hungAfter, func() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.answered[0] }) {
		return fmt.Errorf("mcp: initialize was not answered within %s", hungAfter)
	}
	if err := m.send(-1, m.edges[0], `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return err
	}
	for i := 1; i < maxCalls && !stopped(stop); i++ {
		m.add(func(c *tally) { c.sent++ })
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"n":%d}}}`, i, i)
		began := time.Now()
		edge := m.post(i)
		err := m.send(i, edge, body)
		for m.retry && err != nil && err.Error() == "conn" && time.Since(began) < hungAfter {
			m.add(func(c *tally) { c.retried++ })
			if edge = m.other(edge); edge != "" {
				time.Sleep(50 * time.Millisecond)
				err = m.send(i, edge, body)
			}
		}
		if err != nil {
			m.fail(err.Error(), began)
		}
		select {
		case <-stop:
		case <-time.After(every):
		}
	}
	// Every answer still due has hungAfter to come.
	until(hungAfter+time.Second, func() bool { m.mu.Lock(); defer m.mu.Unlock(); return len(m.pending) == 0 })
	m.mu.Lock()
	hung := map[int]time.Time{}
	for id, at := range m.pending {
		if id > 0 {
			hung[id] = at
		}
	}
	m.mu.Unlock()
	for _, at := range hung {
		m.fail("hung", at)
	}
	return nil
}

// other is the edge that is not edge.
func (m *mcpSession) other(edge string) string {
	for _, e := range m.edges {
		if e != edge {
			return e
		}
	}
	return ""
}

// send POSTs one message for the session to edge; id < 0 is a notification.
func (m *mcpSession) send(id int, edge, body string) error {
	m.mu.Lock()
	endpoint := m.endpoint
	if id >= 0 {
		m.pending[id] = time.Now()
	}
	m.mu.Unlock()
	resp, err := quick.Post(edge+endpoint, "application/json", strings.NewReader(body))
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			err = fmt.Errorf("%d", resp.StatusCode)
		}
	} else {
		err = fmt.Errorf("conn")
	}
	if err != nil {
		m.mu.Lock()
		delete(m.pending, id)
		m.mu.Unlock()
	}
	return err
}

// hold opens the stream on edge, resuming after the last event seen, and reads it
// until it breaks or ctx ends.
func (m *mcpSession) hold(ctx context.Context, edge string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, edge+m.link, nil)
	if err != nil {
		return
	}
	req.Header.Set("Accept", "text/event-stream")
	m.mu.Lock()
	if m.lastID != "" {
		req.Header.Set("Last-Event-ID", m.lastID)
	}
	m.streams = append(m.streams, fmt.Sprintf("%s after %q", edge, m.lastID))
	m.mu.Unlock()
	resp, err := streamClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		m.mu.Lock()
		m.streams = append(m.streams, fmt.Sprintf("refused %d", resp.StatusCode))
		m.mu.Unlock()
		return
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var id, event string
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data.Len() > 0 || event != "" {
				m.event(id, event, data.String())
			}
			id, event = "", ""
			data.Reset()
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
}

// event takes one event of the stream.
func (m *mcpSession) event(id, event, data string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id != "" {
		m.lastID = id
	}
	switch event {
	case "endpoint":
		u, err := url.Parse(data)
		if err != nil {
			return
		}
		s := u.Query().Get("session_id")
		if m.session == "" {
			m.session = s
			m.endpoint = u.RequestURI()
			if !strings.HasPrefix(m.endpoint, "/") { // relative to the link's path
				m.endpoint = strings.TrimSuffix(m.link, "sse") + m.endpoint
			}
			close(m.ready)
		} else if s != m.session {
			m.changed = append(m.changed, s)
		}
	case "", "message":
		var msg struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal([]byte(data), &msg) != nil || msg.ID == nil {
			return
		}
		if m.answered[*msg.ID] {
			m.duplicates++
			return
		}
		m.answered[*msg.ID] = true
		sent, ok := m.pending[*msg.ID]
		if !ok {
			sent = time.Now()
		}
		delete(m.pending, *msg.ID)
		if *msg.ID == 0 {
			return
		}
		// As every failure, told by when its request was sent. A result that says the
		// call failed (isError: the tool was unavailable for it) is a failed call, as
		// a 503 is over HTTP; any other answer that is not the echo is wrong.
		var res struct {
			IsError bool `json:"isError"`
		}
		if msg.Error == nil && json.Unmarshal(msg.Result, &res) == nil && res.IsError {
			m.fail("call-failed", sent)
			return
		}
		if msg.Error != nil || msg.Result == nil || !strings.Contains(string(msg.Result), fmt.Sprintf(`\"n\":%d`, *msg.ID)) &&
			!strings.Contains(string(msg.Result), fmt.Sprintf(`"n":%d`, *msg.ID)) {
			m.rpcErrors = append(m.rpcErrors, data)
			m.fail("rpc-error", sent)
			return
		}
		m.add(func(c *tally) { c.answered++ })
	}
}

// String says what became of the session's requests, and of its stream.
func (m *mcpSession) String() string {
	s := m.tally.String()
	m.mu.Lock()
	defer m.mu.Unlock()
	s += fmt.Sprintf("; answers twice %d; streams: %s", m.duplicates, strings.Join(m.streams, ", "))
	if len(m.changed) > 0 {
		s += fmt.Sprintf("; SESSION CHANGED to %v", m.changed)
	}
	return s
}

// problems lists what a user of the session would see go wrong.
func (m *mcpSession) problems() []string {
	var p []string
	if n := m.failures(); n > 0 {
		p = append(p, fmt.Sprintf("%d requests failed or went unanswered", n))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.duplicates > 0 {
		p = append(p, fmt.Sprintf("%d answers came twice", m.duplicates))
	}
	if len(m.changed) > 0 {
		p = append(p, fmt.Sprintf("the session changed from %s to %v", m.session, m.changed))
	}
	if len(m.rpcErrors) > 0 {
		p = append(p, fmt.Sprintf("wrong answers, first %s", m.rpcErrors[0]))
	}
	return p
}
