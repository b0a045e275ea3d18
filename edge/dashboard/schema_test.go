package dashboard

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestSchemaFields(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   []field
	}{
		{
			name:   "top-level properties keep the schema's order and say what is required",
			schema: `{"type":"object","properties":{"to":{"type":"string","format":"email","description":"Recipient"},"cc":{"type":["string","null"]}},"required":["to"]}`,
			want: []field{
				{Name: "to", Type: "string", Required: true, Description: "Recipient", Format: "email"},
				{Name: "cc", Type: "string or null"},
			},
		},
		{
			name:   "nested objects and arrays of objects follow their parent",
			schema: `{"type":"object","properties":{"address":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"items":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"}}}}}}`,
			want: []field{
				{Name: "address", Type: "object"},
				{Name: "address.city", Type: "string", Required: true},
				{Name: "items", Type: "array of object"},
				{Name: "items[].sku", Type: "string"},
			},
		},
		{
			name:   "local references are followed",
			schema: `{"$defs":{"n":{"type":"integer","minimum":1,"description":"How many"}},"type":"object","properties":{"count":{"$ref":"#/$defs/n"}}}`,
			want:   []field{{Name: "count", Type: "integer", Description: "How many", Format: "≥ 1"}},
		},
		{
			name:   "enums and alternatives are put in words",
			schema: `{"properties":{"level":{"enum":["a","b"]},"when":{"anyOf":[{"type":"string","format":"date"},{"type":"integer"}]}}}`,
			want: []field{
				{Name: "level", Type: "string", Format: `one of "a", "b"`},
				{Name: "when", Type: "string or integer"},
			},
		},
		{name: "no schema has no fields", schema: ``, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseSchema(json.RawMessage(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			if got := s.fields(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("fields:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestSchemaExample(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   string
	}{
		{
			name:   "required fields only, with values of their format",
			schema: `{"type":"object","properties":{"to":{"type":"string","format":"email"},"subject":{"type":"string"},"cc":{"type":"string"}},"required":["to","subject"]}`,
			want:   `{"to":"user@example.com","subject":"example subject"}`,
		},
		{
			name:   "every field when none is required; examples, defaults and enums win",
			schema: `{"type":"object","properties":{"n":{"type":"integer","minimum":3},"flag":{"type":"boolean","default":true},"mode":{"enum":["fast","slow"]},"city":{"type":"string","examples":["Oslo"]}}}`,
			want:   `{"n":3,"flag":true,"mode":"fast","city":"Oslo"}`,
		},
		{
			name:   "nested objects and arrays with a minimum of items",
			schema: `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"number"}}},"tags":{"type":"array","items":{"type":"string"},"minItems":1}},"required":["a","tags"]}`,
			want:   `{"a":{"b":0},"tags":["example tags"]}`,
		},
		{name: "no schema gives an empty object", schema: ``, want: `{}`},
		{name: "a recursive schema stops", schema: `{"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}},"required":["next"]}},"$ref":"#/$defs/n"}`,
			want: `{"next":{"next":{"next":{"next":{"next":{"next":{"next":null}}}}}}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseSchema(json.RawMessage(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			got := compactJSON(s.example())
			if got != tc.want {
				t.Errorf("example %s, want %s", got, tc.want)
			}
		})
	}
}
