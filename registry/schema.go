package registry

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"
	"unicode/utf8"

	"github.com/toolgate/toolgate/bus/wire"
)

// inputSchema is a method's compiled input schema, compiled on first use and shared
// by later versions of the tool record whose schema bytes are the same.
type inputSchema struct {
	raw   json.RawMessage
	log   *slog.Logger
	once  sync.Once
	input *wire.InputSchema
	err   error
}

func (s *inputSchema) compiled(tool, method string) (*wire.InputSchema, error) {
	s.once.Do(func() {
		s.input, s.err = wire.CompileInput(s.raw, wire.SchemaURL(tool, method))
		if s.err != nil && s.log != nil {
			s.log.Error("registry: a method's input schema does not compile; its calls are refused", "tool", tool, "method", method, "err", s.err)
		}
	})
	return s.input, s.err
}

// IsObject reports whether b is one JSON object, whitespace around it allowed, in
// UTF-8 as JSON must be (RFC 8259): encoding/json's own check lets invalid bytes inside
// strings through, and a tool would receive them.
func IsObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{' && utf8.Valid(b) && json.Valid(b)
}
