package workers

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
)

// Func declares a method whose parameters decode into In and whose result is an Out,
// with both schemas inferred from the Go types: exported fields under their JSON
// names, required unless tagged omitempty or omitzero, no others allowed; a field's
// `jsonschema:"..."` tag is its description. In must be a struct (or a map with
// string keys), since every call's parameters are a JSON object.
//
// Where a type cannot say all the schema should (a string that must be an e-mail
// address, say), set InputSchema or OutputSchema on the returned Method.
func Func[In, Out any](name, description string, fn func(ctx context.Context, c *Call, in In) (Out, error)) Method {
	m := Method{
		Name:        name,
		Description: description,
		Handler: func(ctx context.Context, c *Call) (any, error) {
			var in In
			if err := c.Bind(&in); err != nil {
				return nil, err
			}
			return fn(ctx, c, in)
		},
	}
	in, err := inferSchema(reflect.TypeFor[In]())
	if err != nil {
		m.err = fmt.Errorf("input schema: %w", err)
		return m
	}
	if !objectSchema(in) {
		m.err = fmt.Errorf("input schema: %v is not a struct or a map with string keys; parameters are a JSON object", reflect.TypeFor[In]())
		return m
	}
	m.InputSchema = in
	if out := reflect.TypeFor[Out](); !unschemed(out) {
		if m.OutputSchema, err = inferSchema(out); err != nil {
			m.err = fmt.Errorf("output schema: %w", err)
		}
	}
	return m
}

// unschemed reports whether results of type t carry no schema of their own: bytes
// sent as they are, or an MCP result, whose structured content the server describes.
func unschemed(t reflect.Type) bool {
	return t == reflect.TypeFor[Raw]() || t == reflect.TypeFor[*Raw]() || t == reflect.TypeFor[MCPResult]()
}

// inferSchema is the JSON schema of values of t, or nil when t admits any value.
// A pointer at the top is followed: the parameters or result it points to are what
// goes over the wire.
func inferSchema(t reflect.Type) (json.RawMessage, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Interface {
		return nil, nil
	}
	s, err := jsonschema.ForType(t, nil)
	if err != nil {
		return nil, err
	}
	return json.Marshal(s)
}

func objectSchema(raw json.RawMessage) bool {
	var s struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(raw, &s) == nil && s.Type == "object"
}
