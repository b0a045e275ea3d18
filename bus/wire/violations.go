package wire

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Violation is one way a parameter object fails its method's input schema: what the
// edge answers a call with, and the worker SDK too for a request it checks itself
// (CodeSchemaViolation).
type Violation struct {
	Pointer string `json:"pointer"` // JSON pointer into the parameters; "" is the whole object
	Message string `json:"message"`
}

var printer = message.NewPrinter(language.English)

// SchemaViolations flattens a validation error into one entry per failing value, each with
// the JSON pointer of the value at fault.
func SchemaViolations(err error) []Violation {
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

// AcceptsAnyObject reports whether a schema asks nothing of an object but that it is
// one: {"type":"object"}, perhaps with additionalProperties true, and annotations.
// Parameters known to be an object need no validation against such a schema, and
// methods that take anything (an echo, a pass-through to another API) declare one.
func AcceptsAnyObject(raw json.RawMessage) bool {
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
