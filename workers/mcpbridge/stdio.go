package mcpbridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/jsonscan"
)

// The SDK's stdio connection decodes every line the server writes twice, each time
// with a JSON decoder of its own that takes a 32 KiB buffer: as a batch first, then as
// one message. The responses to the bridge's own requests (rawCall: every tools/call
// of a stdio server) it would decode only for the bridge to take them back. So the
// bridge runs a stdio server itself, as mcp.CommandTransport does, and reads what the
// server writes through a filter that hands those responses to their requests before
// the SDK's connection sees the bytes.

// stdioTransport starts command and connects to it over its stdin and stdout.
type stdioTransport struct {
	cmd *exec.Cmd
	// terminate is how long closing waits for the process to exit once its stdin is
	// closed, before it is sent SIGTERM, and then again before SIGKILL.
	terminate time.Duration
	// divert is offered each response to one of the bridge's own requests; what it
	// takes the SDK's connection never reads. Set by observed.Connect.
	divert func(*jsonrpc.Response) bool
}

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	out := &rawFilter{r: bufio.NewReaderSize(stdout, rawFilterBuffer), divert: t.divert}
	in := &childStdin{WriteCloser: stdin, cmd: t.cmd, terminate: t.terminate}
	// The connection is closed by closing stdin (the MCP way to end a stdio session),
	// not stdout.
	return (&mcp.IOTransport{Reader: io.NopCloser(out), Writer: in}).Connect(ctx)
}

// childStdin is the server's stdin. Closing it ends the server: it closes the pipe,
// then waits for the process to exit, signalling it to terminate if it does not, and
// then killing it (the stdio transport's shutdown, as mcp.CommandTransport does it).
type childStdin struct {
	io.WriteCloser
	cmd       *exec.Cmd
	terminate time.Duration
}

func (c *childStdin) Close() error {
	if err := c.WriteCloser.Close(); err != nil {
		return fmt.Errorf("closing stdin: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	wait := func() (error, bool) {
		select {
		case err := <-exited:
			return err, true
		case <-time.After(c.terminate):
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if c.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := c.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("the server's process does not exit")
}

// rawFilterBuffer is the longest line the filter looks at: a longer one passes to
// the SDK's connection, which hands a response to the bridge's requests back too
// (observedConn.Read), only at more cost.
const rawFilterBuffer = 64 << 10

// rawFilter passes what the server writes on, line by line, but for the responses to
// the bridge's own requests that divert takes.
type rawFilter struct {
	r       *bufio.Reader
	divert  func(*jsonrpc.Response) bool
	pending []byte // what is left of the line being passed on
	long    bool   // the line being passed on is longer than the buffer: no look at its rest
}

func (f *rawFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		line, err := f.r.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			f.long = true
		case err != nil:
			if len(line) == 0 {
				return 0, err
			}
			f.long = false
		default:
			wasLong := f.long
			f.long = false
			if !wasLong && f.diverted(line) {
				continue
			}
		}
		f.pending = line
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// rawMarker is in every response to a request of the bridge's own, and in little
// else: its ids are strings that start with rawIDPrefix.
var rawMarker = []byte(`"` + rawIDPrefix)

// diverted hands line to divert when it is a response to a request of the bridge's.
func (f *rawFilter) diverted(line []byte) bool {
	if f.divert == nil || !bytes.Contains(line, rawMarker) {
		return false
	}
	if id, result, ok := scanResult(line); ok {
		if len(id) <= len(rawIDPrefix) || id[:len(rawIDPrefix)] != rawIDPrefix {
			return false
		}
		jid, err := jsonrpc.MakeID(id)
		return err == nil && f.divert(&jsonrpc.Response{ID: jid, Result: result})
	}
	var m struct {
		ID     string           `json:"id"`
		Method string           `json:"method"`
		Result json.RawMessage  `json:"result"`
		Error  *jsonrpc.Error   `json:"error"`
		Params *json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method != "" || m.Params != nil || len(m.ID) <= len(rawIDPrefix) || m.ID[:len(rawIDPrefix)] != rawIDPrefix {
		return false
	}
	if m.Result == nil && m.Error == nil {
		return false // no response: let the SDK's connection say what is wrong with it
	}
	id, err := jsonrpc.MakeID(m.ID)
	if err != nil {
		return false
	}
	resp := &jsonrpc.Response{ID: id, Result: m.Result}
	if m.Error != nil {
		resp.Error = m.Error
	}
	return f.divert(resp)
}

// scanResult reads the common shape of a successful response, {"jsonrpc", "id" a
// plain string, "result"}, without a decoder; ok is false for anything else, which
// diverted decodes. result is a copy: line is the reader's buffer.
func scanResult(line []byte) (id string, result json.RawMessage, ok bool) {
	if !json.Valid(line) {
		return "", nil, false
	}
	ok = jsonscan.Members(line, func(key, value []byte) bool {
		switch string(key) {
		case `"jsonrpc"`:
		case `"id"`:
			var plain bool
			id, plain = jsonscan.PlainString(value)
			return plain
		case `"result"`:
			result = bytes.Clone(value)
		default:
			return false
		}
		return true
	})
	return id, result, ok && id != "" && result != nil
}
