package wire

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// CompileSchema compiles a method's input schema, filed under url. The dialect is
// JSON Schema 2020-12 unless the schema's $schema names another (MCP servers often
// send draft-07), and formats such as "email" are asserted, not merely annotated.
//
// A top-level object schema that lists properties but says nothing of others is
// closed (additionalProperties: false): a call's fields are exactly those its method
// takes, so a misspelt optional field is an error rather than silently ignored.
//
// A schema that does not compile keeps a worker from starting, and an edge from
// taking calls of that method: both sides compile it here.
func CompileSchema(raw json.RawMessage, url string) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if obj, ok := doc.(map[string]any); ok {
		_, hasProps := obj["properties"]
		_, hasAdditional := obj["additionalProperties"]
		_, hasUnevaluated := obj["unevaluatedProperties"]
		_, hasPattern := obj["patternProperties"]
		if hasProps && !hasAdditional && !hasUnevaluated && !hasPattern {
			closed := make(map[string]any, len(obj)+1)
			for k, v := range obj {
				closed[k] = v
			}
			closed["additionalProperties"] = false
			doc = closed
		}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// SchemaURL is where the input schema of a tool's method is filed while it compiles:
// what its errors name.
func SchemaURL(tool, method string) string {
	return "toolgate:///" + tool + "/" + method + "/input.json"
}

// CheckInputSchema returns why raw cannot serve as a method's input schema, or nil.
func CheckInputSchema(raw json.RawMessage) error {
	_, err := CompileSchema(raw, SchemaURL("check", "input"))
	return err
}
