package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/toolgate/toolgate/bench/load"
	"github.com/toolgate/toolgate/bus/wire"
)

// payload is what every path sends: a small JSON object the echo tool returns.
var payload = []byte(`{"message":"hello, gateway","n":42}`)

var client = &http.Client{Transport: &http.Transport{
	MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, MaxConnsPerHost: 0, IdleConnTimeout: time.Minute,
}}

// account is what the bench sets up through the admin API.
type account struct {
	key    string
	mcpURL string
	sseURL string
}

func adminDo(ctx context.Context, s *stack, method, path string, body any, out any) error {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, method, s.edgeURL+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+s.adminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("admin %s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// setup makes an account whose limits do not get in the measurement's way, a key,
// and a connection to the echo tool.
func setup(ctx context.Context, s *stack, sessions int) (*account, error) {
	acct := map[string]any{"id": "bench", "name": "Benchmarks",
		"limits": map[string]any{"rate": 1e9, "burst": 1 << 30, "sessions": sessions}}
	if err := adminDo(ctx, s, http.MethodPost, "/admin/accounts", acct, nil); err != nil {
		return nil, err
	}
	var key struct {
		Key string `json:"key"`
	}
	if err := adminDo(ctx, s, http.MethodPost, "/admin/keys", map[string]any{"account": "bench", "name": "bench"}, &key); err != nil {
		return nil, err
	}
	if err := adminDo(ctx, s, http.MethodPost, "/admin/connections", map[string]any{"account": "bench", "tool": "echo"}, nil); err != nil {
		return nil, err
	}
	// The tool's record carries the account's link URLs.
	var tool struct {
		MCPURL string `json:"mcp_url"`
		SSEURL string `json:"sse_url"`
	}
	err := poll(ctx, func() bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.edgeURL+"/tools/echo", nil)
		req.Header.Set("SERVICE_API_KEY", key.Key)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&tool) == nil && tool.MCPURL != ""
	})
	if err != nil {
		return nil, fmt.Errorf("echo tool never appeared for the bench account: %w", err)
	}
	return &account{key: key.Key, mcpURL: tool.MCPURL, sseURL: tool.SSEURL}, nil
}

func post(ctx context.Context, url string, header http.Header, body []byte) ([]byte, *http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header = header
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return data, resp, err
}

func expectOK(data []byte, resp *http.Response, err error) error {
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %.200s", resp.StatusCode, data)
	}
	return nil
}

// bareCall is the ceiling: a gin handler that returns the body it gets.
func bareCall(s *stack) load.Func {
	h := http.Header{"Content-Type": {"application/json"}}
	return func(ctx context.Context) error { return expectOK(post(ctx, s.bareURL+"/echo", h, payload)) }
}

// busCall is the bus ceiling: a request to the echo worker straight over NATS, with
// the headers an edge would set.
func busCall(nc *nats.Conn) load.Func {
	return func(ctx context.Context) error {
		id := nuid.Next()
		msg := wire.DefaultSubjects.Msg(ctx, &wire.Request{Tool: "echo", Method: "echo", CallID: id, RequestID: id,
			Account: "bench", Deadline: time.Now().Add(10 * time.Second), Data: payload})
		reply, err := nc.RequestMsgWithContext(ctx, msg)
		if err != nil {
			return err
		}
		_, err = wire.ReadReply(reply)
		return err
	}
}

// toolCall is the product's REST path: auth, validation, bus, worker. While t is
// on, it keeps the edge's Server-Timing of each answer.
func toolCall(s *stack, a *account, t *timings) load.Func {
	h := http.Header{"Content-Type": {"application/json"}, "SERVICE_API_KEY": {a.key}}
	return func(ctx context.Context) error {
		data, resp, err := post(ctx, s.edgeURL+"/tool-call/echo/echo", h, payload)
		if err := expectOK(data, resp, err); err != nil {
			return err
		}
		if t.on.Load() {
			return t.add(resp.Header.Get("Server-Timing"))
		}
		return nil
	}
}

// timings collects the edge's Server-Timing: the time of the gateway and that of the
// tool (the bus round trip), per answer.
type timings struct {
	on            atomic.Bool
	mu            sync.Mutex
	gateway, tool []time.Duration
}

func (t *timings) add(header string) error {
	var gw, tool time.Duration
	var seen int
	for metric := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(metric), ";")
		ms, ok := strings.CutPrefix(params, "dur=")
		f, err := strconv.ParseFloat(ms, 64)
		if !ok || err != nil {
			return fmt.Errorf("Server-Timing %q: no dur in %q", header, metric)
		}
		d := time.Duration(f * float64(time.Millisecond))
		switch name {
		case "gateway":
			gw, seen = d, seen+1
		case "tool":
			tool, seen = d, seen+1
		}
	}
	if seen != 2 {
		return fmt.Errorf("Server-Timing %q: want gateway and tool", header)
	}
	t.mu.Lock()
	t.gateway, t.tool = append(t.gateway, gw), append(t.tool, tool)
	t.mu.Unlock()
	return nil
}

// medians returns the median gateway and tool times collected, and how many answers
// they are of.
func (t *timings) medians() (gateway, tool time.Duration, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	median := func(ds []time.Duration) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	return median(t.gateway), median(t.tool), len(t.tool)
}

func rpc(id int64, method string, params any) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return b
}

var callParams = map[string]any{"name": "echo", "arguments": json.RawMessage(payload)}

// rpcResult reads a JSON-RPC response from a JSON body or the first data event of
// an SSE body.
func rpcResult(data []byte, contentType string) error {
	if strings.HasPrefix(contentType, "text/event-stream") {
		for _, line := range strings.Split(string(data), "\n") {
			if d, ok := strings.CutPrefix(line, "data:"); ok && strings.Contains(d, `"id"`) {
				data = []byte(d)
				break
			}
		}
	}
	var r struct {
		Result *struct {
			IsError bool `json:"isError"`
		} `json:"result"`
		Error *struct{ Message string } `json:"error"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("response %.200q: %w", data, err)
	}
	if r.Error != nil {
		return errors.New(r.Error.Message)
	}
	if r.Result == nil || r.Result.IsError {
		return fmt.Errorf("tool call failed: %.200s", data)
	}
	return nil
}

const protocolVersion = "2025-06-18"

// streamableCall is MCP tools/call over Streamable HTTP, one session per caller,
// initialized on first use.
func streamableCall(a *account) load.Func {
	pool := make(chan string, 1024)
	var n atomic.Int64
	return func(ctx context.Context) error {
		var sid string
		select {
		case sid = <-pool:
		default:
			var err error
			if sid, err = initSession(ctx, a, n.Add(1)); err != nil {
				return err
			}
		}
		defer func() { pool <- sid }()
		h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Mcp-Session-Id": {sid}, "MCP-Protocol-Version": {protocolVersion}}
		data, resp, err := post(ctx, a.mcpURL, h, rpc(n.Add(1), "tools/call", callParams))
		if err := expectOK(data, resp, err); err != nil {
			return err
		}
		return rpcResult(data, resp.Header.Get("Content-Type"))
	}
}

// initSession opens a Streamable HTTP session: initialize, then initialized.
func initSession(ctx context.Context, a *account, id int64) (string, error) {
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
	data, resp, err := post(ctx, a.mcpURL, h, rpc(id, "initialize", map[string]any{
		"protocolVersion": protocolVersion, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "tgbench", "version": "1"}}))
	if err := expectOK(data, resp, err); err != nil {
		return "", fmt.Errorf("initialize: %w", err)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	h.Set("Mcp-Session-Id", sid)
	h.Set("MCP-Protocol-Version", protocolVersion)
	data, resp, err = post(ctx, a.mcpURL, h, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		return "", fmt.Errorf("initialized: %w", err)
	}
	if resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("initialized: status %d: %.200s", resp.StatusCode, data)
	}
	return sid, nil
}

// idleStream is an SSE stream held open and idle; Close ends it and its session.
type idleStream interface{ Close() error }

// openStreamable opens a Streamable HTTP session and its standalone GET stream.
func openStreamable(ctx context.Context, a *account, id int64) (idleStream, error) {
	sid, err := initSession(ctx, a, id)
	if err != nil {
		return nil, err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.mcpURL, nil)
	req.Header = http.Header{"Accept": {"text/event-stream"}, "Mcp-Session-Id": {sid}, "MCP-Protocol-Version": {protocolVersion}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		return nil, fmt.Errorf("GET stream: status %d, %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &streamableStream{a: a, sid: sid, body: resp.Body}, nil
}

type streamableStream struct {
	a    *account
	sid  string
	body io.Closer
}

// Close ends the stream, then the session: a Streamable session outlives its streams
// until it is deleted or expires.
func (s *streamableStream) Close() error {
	s.body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, s.a.mcpURL, nil)
	req.Header = http.Header{"Mcp-Session-Id": {s.sid}, "MCP-Protocol-Version": {protocolVersion}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// sseSession is one legacy HTTP+SSE session: a stream, and the URL to POST to.
type sseSession struct {
	events   *bufio.Reader
	body     io.Closer
	messages string
}

// openSSE opens a legacy stream and reads its endpoint event.
func openSSE(ctx context.Context, sseURL string) (*sseSession, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, sseURL, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("sse: status %d", resp.StatusCode)
	}
	s := &sseSession{events: bufio.NewReader(resp.Body), body: resp.Body}
	ev, data, err := s.next()
	if err != nil || ev != "endpoint" {
		resp.Body.Close()
		return nil, fmt.Errorf("sse: want an endpoint event, got %q %q: %v", ev, data, err)
	}
	base := sseURL[:strings.Index(sseURL, "/mcp/")]
	s.messages = base + data
	return s, nil
}

// Close ends the stream, and so the legacy session.
func (s *sseSession) Close() error { return s.body.Close() }

// next reads one event, skipping keep-alive comments.
func (s *sseSession) next() (event, data string, err error) {
	for {
		line, err := s.events.ReadString('\n')
		if err != nil {
			return "", "", err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "" && (event != "" || data != ""):
			return event, data, nil
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimSpace(line[len("data:"):])
		}
	}
}

// call POSTs a request and reads the stream until its response arrives.
func (s *sseSession) call(ctx context.Context, id int64, method string, params any) error {
	h := http.Header{"Content-Type": {"application/json"}}
	data, resp, err := post(ctx, s.messages, h, rpc(id, method, params))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("status %d: %.200s", resp.StatusCode, data)
	}
	want := fmt.Sprintf(`"id":%d`, id)
	for {
		ev, data, err := s.next()
		if err != nil {
			return err
		}
		if ev == "message" && strings.Contains(data, want) {
			if method == "tools/call" {
				return rpcResult([]byte(data), "application/json")
			}
			return nil
		}
	}
}

// legacyCall is MCP tools/call over the 2024-11-05 HTTP+SSE transport, one session
// per caller.
func legacyCall(a *account) load.Func {
	pool := make(chan *sseSession, 1024)
	var n atomic.Int64
	return func(ctx context.Context) error {
		var s *sseSession
		select {
		case s = <-pool:
		default:
			var err error
			if s, err = openSSE(context.Background(), a.sseURL); err != nil {
				return err
			}
			if err := s.call(ctx, n.Add(1), "initialize", map[string]any{"protocolVersion": "2024-11-05",
				"capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "tgbench", "version": "1"}}); err != nil {
				return fmt.Errorf("initialize: %w", err)
			}
			post(ctx, s.messages, http.Header{"Content-Type": {"application/json"}}, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
		}
		err := s.call(ctx, n.Add(1), "tools/call", callParams)
		if err != nil {
			s.body.Close()
			return err
		}
		pool <- s
		return nil
	}
}
