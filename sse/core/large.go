package core

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/jsonscan"
	"github.com/toolgate/toolgate/payloads"
	"github.com/toolgate/toolgate/registry"
)

// A tools/call whose tool answered past one message (a payload in the bucket) is
// answered from the bucket as it is read: the response's frame is written, and the
// result's bytes go into it from the payload, so the edge never holds the result
// whole. The result is what toolAnswer makes of a small reply, in the same shape: the
// worker's CallToolResult as it sent it, or the tool's bytes as a text content (a
// JSON string, escaped as it is read) and, for a method with an output schema, as
// structuredContent too.
//
// Which requests take this path says Request.LargeAnswers: the transports set it
// where they write the answer themselves (AnswerRequest, ResultEvent, SendResult and
// the call streams); any other path gets the result whole, as before.

// largeResult is a tools/call result whose tool reply is the payload p of tool.
type largeResult struct {
	store   *payloads.Store
	tool    string
	p       wire.Payload
	raw     bool // the worker's CallToolResult, as it sent it
	isError bool
	schema  bool // the method declares an output schema: the bytes are structuredContent too
	// extra is what a 2026-07-28 result carries besides (`"_meta":{…},"resultType":…`),
	// written before the closing brace of a result this package frames.
	extra []byte
}

// largeAnswer is the tools/call result of a reply of method m that names a payload.
func (s *Server) largeAnswer(tool string, m *registry.Method, reply *wire.Reply) *largeResult {
	return &largeResult{store: s.gw.Payloads(), tool: tool, p: *reply.Payload, raw: reply.MCPResult,
		isError: reply.Status >= 400, schema: len(m.OutputSchema) > 0}
}

// isObject reads the payload through and reports whether it is one JSON object, as
// toolAnswer asks json.Valid of a small reply (a CallToolResult and structuredContent
// are objects).
func (lr *largeResult) isObject(ctx context.Context) (bool, error) {
	var check jsonscan.ObjectChecker
	if err := lr.store.WriteTo(ctx, &check, lr.tool, lr.p); err != nil {
		if check.Close() != nil {
			return false, nil // stopped by the checker: not an object
		}
		return false, err
	}
	return check.Close() == nil, nil
}

// decide settles, before anything is written, what the result is: a worker's
// CallToolResult that is not an object is text, as toolAnswer makes it, and bytes
// that are not an object are not structuredContent.
func (lr *largeResult) decide(ctx context.Context) error {
	if !lr.raw && (!lr.schema || lr.isError) {
		lr.schema = false
		return nil
	}
	ok, err := lr.isObject(ctx)
	if err != nil {
		return fmt.Errorf("sse: a large result: %w", err)
	}
	if lr.raw && !ok {
		lr.raw, lr.schema = false, false
	}
	lr.schema = lr.schema && ok && !lr.raw
	return nil
}

// writeTo writes the result's JSON to w, read from the payload as it goes, and
// removes the payload once written, whole or not: nothing reads a result again
// whose writing broke off (its client left, or the log's copy could not be made),
// so a client that leaves mid-answer leaves nothing in the bucket for the TTL.
func (lr *largeResult) writeTo(ctx context.Context, w io.Writer) error {
	defer lr.store.Delete(context.WithoutCancel(ctx), lr.tool, lr.p)
	if err := lr.decide(ctx); err != nil {
		return err
	}
	return lr.write(ctx, w)
}

func (lr *largeResult) write(ctx context.Context, w io.Writer) error {
	if lr.raw {
		return lr.store.WriteTo(ctx, w, lr.tool, lr.p)
	}
	if _, err := io.WriteString(w, `{"content":[{"type":"text","text":"`); err != nil {
		return err
	}
	text := &jsonString{w: w}
	if err := lr.store.WriteTo(ctx, text, lr.tool, lr.p); err != nil {
		return err
	}
	tail := text.close()
	tail = append(tail, `"}]`...)
	if lr.schema {
		if _, err := w.Write(append(tail, `,"structuredContent":`...)); err != nil {
			return err
		}
		if err := lr.store.WriteTo(ctx, w, lr.tool, lr.p); err != nil {
			return err
		}
		tail = tail[:0]
	}
	if lr.isError {
		tail = append(tail, `,"isError":true`...)
	}
	if len(lr.extra) > 0 {
		tail = append(append(tail, ','), lr.extra...)
	}
	_, err := w.Write(append(tail, '}'))
	return err
}

// whole is the result read whole, for a path that cannot stream it.
func (lr *largeResult) whole(ctx context.Context) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := lr.writeTo(ctx, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// MarshalJSON is the result whole: any path that encodes it rather than streaming it
// still answers right.
func (lr *largeResult) MarshalJSON() ([]byte, error) {
	return lr.whole(context.Background())
}

// jsonString writes bytes as the inside of a JSON string, as encoding/json encodes a
// Go string (invalid UTF-8 as U+FFFD; <, > and & escaped), holding back the bytes of
// a character split between two writes. It reuses one buffer: a result of any size
// costs a few pieces of 32 KiB.
type jsonString struct {
	w    io.Writer
	held []byte // the start of a character whose rest is still to come
	out  []byte
}

func (j *jsonString) Write(p []byte) (int, error) {
	n := len(p)
	j.out = j.out[:0]
	if len(j.held) > 0 {
		// The characters that begin in what was held, ended by p's first bytes.
		var c [2 * utf8.UTFMax]byte
		h := copy(c[:], j.held)
		m := h + copy(c[h:], p[:min(len(p), utf8.UTFMax)])
		i := 0
		for i < h {
			if !utf8.FullRune(c[i:m]) { // p is shorter than a character: hold it all
				j.held = append(j.held[:0], c[i:m]...)
				return n, j.flush()
			}
			_, size := utf8.DecodeRune(c[i:m])
			j.out = appendEscaped(j.out, c[i:i+size])
			i += size
		}
		j.held, p = j.held[:0], p[i-h:]
	}
	// The end of p may be the start of a character whose rest is still to come.
	cut := len(p)
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				cut = i
			}
			break
		}
	}
	j.out = appendEscaped(j.out, p[:cut])
	j.held = append(j.held, p[cut:]...)
	return n, j.flush()
}

func (j *jsonString) flush() error {
	if len(j.out) == 0 {
		return nil
	}
	_, err := j.w.Write(j.out)
	return err
}

// close is what is left to write of the string, once its bytes are all written.
func (j *jsonString) close() []byte {
	return appendEscaped(nil, j.held)
}

const hexDigits = "0123456789abcdef"

// appendEscaped appends b escaped as encoding/json escapes a string's inside.
func appendEscaped(dst, b []byte) []byte {
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			dst = append(dst, b[i:i+size]...)
		}
		i += size
	}
	return dst
}

// resultFrame is the response to id around a result: what goes before it and after.
func resultFrame(id jsonrpc.ID) (head, tail []byte) {
	full := EncodeResult(id, json.RawMessage(`null`))
	i := bytes.LastIndex(full, []byte(`null`))
	return full[:i], full[i+len(`null`):]
}
