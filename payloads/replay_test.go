package payloads_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
)

// addEdge starts a second `toolgate edge` on the stack's NATS, with the same link
// secret and admin key, and returns its URL.
func (s *stack) addEdge(t *testing.T) string {
	t.Helper()
	u := fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePorts(t, 1)[0])
	s.run(s.bin, s.dir, "edge2", "edge", "--nats", s.nats, "--listen", strings.TrimPrefix(u, "http://"),
		"--link-secret-file", filepath.Join(s.dir, "link-secret"), "--admin-key-file", filepath.Join(s.dir, "admin-key"),
		"--drain-delay", "0", "--wait", "60s")
	testenv.WaitFor(t, "the second edge is ready", func() bool {
		resp, err := http.Get(u + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return u
}

// onEdge is link, an URL of the stack's edge, on the edge at base instead.
func onEdge(t *testing.T, link, base string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := url.Parse(base)
	u.Host = b.Host
	return u.String()
}

// sseReader reads server-sent events off an HTTP response as they arrive over TCP,
// line by line, as a client does: raw, with no MCP client between.
type sseReader struct {
	resp *http.Response
	r    *bufio.Reader
}

func openSSE(t *testing.T, method, u string, headers map[string]string, body string) *sseReader {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	// A transport of its own: closing the body closes the TCP connection.
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
		resp.Body.Close()
		t.Fatalf("%s %s: %d %s %s", method, u, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &sseReader{resp: resp, r: bufio.NewReaderSize(resp.Body, 64<<10)}
	// A stream that stops short of what the test waits for fails it, in time.
	stop := time.AfterFunc(2*time.Minute, s.cut)
	t.Cleanup(func() { stop.Stop(); s.cut() })
	return s
}

// streamOnly is headers h asking for the answer on a stream, whenever it comes.
func streamOnly(h map[string]string) map[string]string {
	o := maps.Clone(h)
	o["Accept"] = "text/event-stream"
	return o
}

// cut closes the stream's connection, wherever the reading got to.
func (s *sseReader) cut() { s.resp.Body.Close() }

// sseEvent is one event: its id, name and data (its data lines joined by newlines).
type sseEvent struct{ id, name, data string }

// next reads the next whole event; cutAfter, when above zero, makes it stop once it
// read the id of the response to id and that many bytes of its data, and cut the
// connection there.
// A line longer than the reader's buffer is read in pieces, as it arrives.
func (s *sseReader) next(t *testing.T, id, cutAfter int) sseEvent {
	t.Helper()
	var ev sseEvent
	var data strings.Builder
	field, lines, cont := "", 0, false
	for {
		b, err := s.r.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			t.Fatalf("reading the stream after %d bytes of data: %v", data.Len(), err)
		}
		piece, ends := string(b), err == nil
		piece = strings.TrimSuffix(piece, "\n")
		if !cont {
			if piece == "" && ends {
				if lines > 0 || ev.id != "" {
					ev.data = data.String()
					return ev
				}
				continue
			}
			name, value, _ := strings.Cut(piece, ":")
			field, piece = name, strings.TrimPrefix(value, " ")
			if field == "data" {
				if lines > 0 {
					data.WriteByte('\n')
				}
				lines++
			}
		}
		switch field {
		case "id":
			ev.id += piece
		case "event":
			ev.name += piece
		case "data":
			data.WriteString(piece)
		}
		cont = !ends
		if cutAfter > 0 && ev.id != "" && data.Len() >= cutAfter && strings.HasPrefix(data.String(), responseTo(id)) {
			s.cut()
			ev.data = data.String()
			return ev
		}
	}
}

// nextResult reads events until the response to id, skipping any other (a priming
// event has no data), and returns it; cutAfter as next's.
func (s *sseReader) nextResult(t *testing.T, id, cutAfter int) (sseEvent, string) {
	t.Helper()
	last := ""
	for {
		ev := s.next(t, id, cutAfter)
		t.Logf("event %q %q: %.120s", ev.id, ev.name, ev.data)
		if strings.HasPrefix(ev.data, responseTo(id)) {
			return ev, last
		}
		if ev.id != "" {
			last = ev.id
		}
	}
}

// responseTo is how a response to id begins.
func responseTo(id int) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,`, id) }

// resultBlob is the sha256 of the blob in a tools/call response's text content.
func resultBlob(t *testing.T, data string) [32]byte {
	t.Helper()
	var rpc struct {
		Result struct {
			Content []struct{ Text string }
			IsError bool
		}
		Error json.RawMessage
	}
	if err := json.Unmarshal([]byte(data), &rpc); err != nil {
		t.Fatalf("the response of %d bytes is not JSON: %v", len(data), err)
	}
	if rpc.Error != nil || rpc.Result.IsError || len(rpc.Result.Content) != 1 {
		t.Fatalf("tools/call: error %s, content %d", rpc.Error, len(rpc.Result.Content))
	}
	return echoed(t, rpc.Result.Content[0].Text)
}

// postJSON posts an MCP message and drains the answer, failing on any status but ok.
func postJSON(t *testing.T, u string, headers map[string]string, body string, ok int) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != ok {
		t.Fatalf("POST %s: %d %s", body, resp.StatusCode, b)
	}
	return resp
}

const (
	replayedSize = 5 << 20
	replayedSeed = 26
	// initialize with sampling declared. A session's tools/call is on a stream kept in
	// the event log from its start when it takes only text/event-stream (streamOnly):
	// taking JSON too, it is answered as JSON when the result comes within the edge's
	// --mcp-stream-after, as a 5 MiB result made by a tool in this process can.
	replayInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
		`"capabilities":{"sampling":{}},"clientInfo":{"name":"replay-test","version":"1"}}}`
	replayCall = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"make","arguments":{"n":5242880,"seed":26}}}`
)

// TestLargeEventReplayedOnAnotherEdge: a tools/call result of 5 MiB, sent on a
// session's call stream (Streamable HTTP, 2025-11-25), which the event log keeps, is
// cut off as it arrives (after its event's id and 64 KiB of its data, or after its
// id and the response's first bytes), and the client resumes on another edge with a
// GET carrying Last-Event-ID, the id of the last event it read whole (the priming
// event); the event is replayed there from the log's copy, intact (sha256
// compared). The client is a raw SSE reader over TCP (net/http, lines read as they
// arrive), so the cut falls where the test says. Legacy HTTP+SSE is not here: its
// stream is its session, which a client that leaves ends at once
// (TestLegacyClientLeaving in package sse), so a resume after the client's own cut
// finds its session only when it comes before the end has spread.
func TestLargeEventReplayedOnAnotherEdge(t *testing.T) {
	large(t, "5 MiB through two edges")
	s := startStack(t)
	c := blobsClient(t, s)
	b := s.addEdge(t)
	want := sha256.Sum256([]byte(seededBlob(replayedSeed, replayedSize)))

	for _, cut := range []struct {
		name  string
		after int
	}{{"mid-event", 64 << 10}, {"after the id", len(responseTo(2))}} {
		t.Run("Streamable HTTP, "+cut.name, func(t *testing.T) {
			resp := postJSON(t, c.mcp, nil, replayInit, http.StatusOK)
			session := resp.Header.Get("Mcp-Session-Id")
			h := map[string]string{"Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}
			postJSON(t, c.mcp, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, http.StatusAccepted)

			call := openSSE(t, http.MethodPost, c.mcp, streamOnly(h), replayCall)
			ev, last := call.nextResult(t, 2, cut.after)
			if ev.id == "" || last == "" || len(ev.data) >= replayedSize {
				t.Fatalf("the call's stream: event %q after %q, %d bytes read before the cut", ev.id, last, len(ev.data))
			}
			h["Last-Event-ID"] = last
			again := openSSE(t, http.MethodGet, onEdge(t, c.mcp, b), h, "")
			got, _ := again.nextResult(t, 2, 0)
			if got.id != ev.id {
				t.Errorf("the replayed event is %q, the cut one %q", got.id, ev.id)
			}
			if resultBlob(t, got.data) != want {
				t.Fatal("the replayed result came back changed")
			}
		})
	}
}

// bucketNames lists the names of the objects the payloads bucket holds, on the
// stack's NATS.
func bucketNames(t *testing.T, s *stack) []string {
	t.Helper()
	nc, err := nats.Connect(s.nats)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	obj, err := js.ObjectStore(ctx, wire.PayloadBucket)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := obj.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range infos {
		names = append(names, i.Name)
	}
	return names
}

// named is how many of names begin with prefix.
func named(names []string, prefix string) int {
	n := 0
	for _, name := range names {
		if strings.HasPrefix(name, prefix) {
			n++
		}
	}
	return n
}

// TestALeftCallLeavesNoToolPayload: a client that leaves while its 5 MiB result is
// being written leaves none of the tool's payload (blobs/…) in the bucket, listed
// on real NATS: taking only JSON, its answer cut after 64 KiB; and on a session's
// call stream, cut after its event's id and 64 KiB, where what stays is the event
// log's copy (~events/…), which a resume reads (TestLargeEventReplayedOnAnotherEdge)
// and the bucket's TTL removes.
func TestALeftCallLeavesNoToolPayload(t *testing.T) {
	large(t, "5 MiB results")
	s := startStack(t)
	c := blobsClient(t, s)
	if n := named(bucketNames(t, s), "blobs/"); n != 0 {
		t.Fatalf("the bucket holds %d parts of blobs before the calls", n)
	}
	resp := postJSON(t, c.mcp, nil, replayInit, http.StatusOK)
	h := map[string]string{"Mcp-Session-Id": resp.Header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version": "2025-11-25"}
	postJSON(t, c.mcp, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, http.StatusAccepted)
	gone := func(t *testing.T) {
		t.Helper()
		testenv.WaitFor(t, "no part of blobs' payload is left", func() bool { return named(bucketNames(t, s), "blobs/") == 0 })
	}

	t.Run("JSON", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, c.mcp, strings.NewReader(replayCall))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("tools/call: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if _, err := io.CopyN(io.Discard, resp.Body, 64<<10); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		gone(t)
	})
	t.Run("call stream", func(t *testing.T) {
		events := named(bucketNames(t, s), "~events/")
		call := openSSE(t, http.MethodPost, c.mcp, streamOnly(h), strings.Replace(replayCall, `"id":2`, `"id":3`, 1))
		if ev, _ := call.nextResult(t, 3, 64<<10); len(ev.data) >= replayedSize {
			t.Fatalf("the whole result arrived before the cut")
		}
		gone(t)
		if n := named(bucketNames(t, s), "~events/"); n <= events {
			t.Fatalf("the bucket holds %d parts of the event log's, %d before: none for a resume", n, events)
		}
	})
}
