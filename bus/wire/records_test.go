package wire_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/bus/wire"
)

func TestCheckInputSchema(t *testing.T) {
	for _, tt := range []struct {
		name, schema string
		ok           bool
	}{
		{"a 2020-12 object schema with local refs compiles", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"a":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/a"}}}`, true},
		{"a draft-07 schema compiles", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`, true},
		{"an unknown type does not", `{"type":"nope"}`, false},
		{"a reference to nowhere does not", `{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := wire.CheckInputSchema(json.RawMessage(tt.schema)); (err == nil) != tt.ok {
				t.Fatalf("CheckInputSchema: %v", err)
			}
		})
	}
}

func TestCheckTool(t *testing.T) {
	for _, tt := range []struct {
		name string
		tool wire.Tool
		want string // in the error; "" for none
	}{
		{"a tool with methods and schemas is fine", wire.Tool{ID: "email", Methods: []wire.Method{{Name: "send_email", InputSchema: json.RawMessage(`{"type":"object"}`)}}}, ""},
		{"a bad tool id", wire.Tool{ID: "E.mail"}, "tool id"},
		{"a bad method name", wire.Tool{ID: "email", Methods: []wire.Method{{Name: "send.email"}}}, "method name"},
		{"a method twice", wire.Tool{ID: "email", Methods: []wire.Method{{Name: "m"}, {Name: "m"}}}, "declared twice"},
		{"a schema that is not JSON", wire.Tool{ID: "email", Methods: []wire.Method{{Name: "m", OutputSchema: json.RawMessage(`{`)}}}, "output schema: not JSON"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := wire.CheckTool(&tt.tool)
			if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("CheckTool: %v, want %q", err, tt.want)
			}
		})
	}
	t.Run("a schema that does not compile is CheckSchemas'", func(t *testing.T) {
		bad := wire.Tool{ID: "email", Methods: []wire.Method{{Name: "m", InputSchema: json.RawMessage(`{"type":"nope"}`)}}}
		if err := wire.CheckTool(&bad); err != nil {
			t.Fatalf("CheckTool: %v", err)
		}
		if err := wire.CheckSchemas(&bad); err == nil || !strings.Contains(err.Error(), "method m: input schema") {
			t.Fatalf("CheckSchemas: %v, want an error naming the method's input schema", err)
		}
	})
}
