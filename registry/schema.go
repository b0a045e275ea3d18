package registry

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/toolgate/toolgate/bus/wire"
)

var printer = message.NewPrinter(language.English)

// violations flattens a validation error into one entry per failing value, each with
// the JSON pointer of the value at fault.
func violations(err error) []Violation {
	verr, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return []Violation{{Message: err.Error()}}
	}
	var out []Violation
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		at := pointer(e.InstanceLocation)
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			for _, name := range k.Missing {
				out = append(out, Violation{Pointer: at + "/" + escapeToken(name), Message: "required field is missing"})
			}
		case *kind.AdditionalProperties:
			for _, name := range k.Properties {
				out = append(out, Violation{Pointer: at + "/" + escapeToken(name), Message: "field is not allowed"})
			}
		default:
			out = append(out, Violation{Pointer: at, Message: e.ErrorKind.LocalizedString(printer)})
		}
	}
	walk(verr)
	slices.SortStableFunc(out, func(a, b Violation) int { return strings.Compare(a.Pointer, b.Pointer) })
	return out
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escapeToken(t))
	}
	return b.String()
}

func escapeToken(t string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(t)
}

// acceptsAnyObject reports whether a schema asks nothing of an object but that it is
// one: {"type":"object"}, perhaps with additionalProperties true, and annotations.
// Parameters known to be an object need no validation against such a schema, and
// methods that take anything (an echo, a pass-through to another API) declare one.
func acceptsAnyObject(raw json.RawMessage) bool {
	var doc map[string]any
	if json.Unmarshal(raw, &doc) != nil {
		return false
	}
	for k, v := range doc {
		switch k {
		case "type":
			if v != "object" {
				return false
			}
		case "additionalProperties", "unevaluatedProperties":
			if v != true {
				return false
			}
		case "$schema", "$id", "$comment", "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly":
		default:
			return false
		}
	}
	return true
}

// inputSchema is a method's compiled input schema, compiled on first use and shared
// by later versions of the tool record whose schema bytes are the same.
type inputSchema struct {
	raw       json.RawMessage
	log       *slog.Logger
	once      sync.Once
	s         *jsonschema.Schema
	anyObject bool // see acceptsAnyObject
	err       error
}

func (s *inputSchema) compiled(tool, method string) (*jsonschema.Schema, error) {
	s.once.Do(func() {
		s.s, s.err = wire.CompileSchema(s.raw, wire.SchemaURL(tool, method))
		if s.err != nil && s.log != nil {
			s.log.Error("registry: a method's input schema does not compile; its calls are refused", "tool", tool, "method", method, "err", s.err)
		}
		s.anyObject = s.err == nil && acceptsAnyObject(s.raw)
	})
	return s.s, s.err
}

// IsObject reports whether b is one JSON object, whitespace around it allowed, in
// UTF-8 as JSON must be (RFC 8259): encoding/json's own check lets invalid bytes inside
// strings through, and a tool would receive them.
func IsObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{' && utf8.Valid(b) && json.Valid(b)
}
