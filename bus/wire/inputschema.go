package wire

import (
	"bytes"
	"encoding/json"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// InputSchema is a method's input schema compiled for checking calls, the same way
// on an edge (a call held whole) and in a worker (a call that came as a payload):
// the library's schema, whether it takes any object (AcceptsAnyObject), and its plain
// form (Plain), which spares most calls the library's decoding and check.
type InputSchema struct {
	// AnyObject: the schema takes any JSON object. The caller knows whether the
	// parameters are known to be one, and checks them itself.
	AnyObject bool
	s         *jsonschema.Schema
	plain     *PlainSchema
}

// CompileInput compiles a method's input schema (CompileSchema) for checking calls.
func CompileInput(raw json.RawMessage, url string) (*InputSchema, error) {
	s, err := CompileSchema(raw, url)
	if err != nil {
		return nil, err
	}
	return &InputSchema{AnyObject: AcceptsAnyObject(raw), s: s, plain: Plain(s)}, nil
}

// IsPlain reports whether the plain check decides what passes (see Plain).
func (is *InputSchema) IsPlain() bool { return is.plain != nil }

// Violations checks a call's parameters: nil when they match the schema, else the
// library's violations ("not JSON: …", with its decoder's reason, when they are not
// JSON).
func (is *InputSchema) Violations(params []byte) []Violation {
	if is.plain != nil && is.plain.Accepts(params) {
		return nil // a refusal is the library's, with its reasons
	}
	inst, err := DecodeInstance(params)
	if err != nil {
		// Not JSON, as far as the fast decoder knows: the library's decoder decides,
		// and says why.
		inst, err = jsonschema.UnmarshalJSON(bytes.NewReader(params))
	}
	if err != nil {
		return []Violation{{Message: "not JSON: " + err.Error()}}
	}
	if err := is.s.Validate(inst); err != nil {
		return SchemaViolations(err)
	}
	return nil
}
