package registry

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	google "github.com/google/jsonschema-go/jsonschema"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/bus/wire"
)

// schemaCheckCases are the schemas and parameters BenchmarkSchemaCheck measures: the
// demo tools' (workers/demo), BenchmarkValidate's three fields, and one with nested
// objects, arrays, enums and formats; each with parameters that pass, and the nested
// one with parameters that do not (a refusal pays the plain check, then the library);
// and a schema that takes any object, which Validate checks with IsObject alone.
var schemaCheckCases = []struct {
	name, schema, params string
	valid                bool
}{
	{"demo send_email", `{"type":"object","properties":{` +
		`"to":{"type":"string","format":"email","description":"the recipient's address"},` +
		`"subject":{"type":"string","maxLength":998},"body":{"type":"string"}},` +
		`"required":["to","subject","body"],"additionalProperties":false}`,
		`{"to":"ada@example.com","subject":"Hello","body":"Nice to meet you."}`, true},
	{"demo list_sent", `{"type":"object","properties":{` +
		`"limit":{"type":"integer","minimum":1,"maximum":1000,"description":"how many messages at most; 100 when absent"}},` +
		`"additionalProperties":false}`,
		`{"limit":20}`, true},
	{"three fields", `{"type":"object","properties":{
		"to":{"type":"string","format":"email"},"subject":{"type":"string","maxLength":200},"body":{"type":"string"}},
		"required":["to","subject"]}`,
		`{"to":"ada@example.com","subject":"Hello","body":"Nice to meet you."}`, true},
	{"nested", nestedSchema, nestedParams, true},
	{"any object", `{"type":"object","additionalProperties":true}`,
		`{"to":"ada@example.com","subject":"Hello","body":"Nice to meet you."}`, true},
	{"nested, refused", nestedSchema, `{"order":{"id":"A-1","placed":"yesterday","lines":[{"sku":"x","qty":0,"unit":"kg"}]},"priority":"urgent"}`, false},
}

const nestedSchema = `{"type":"object","properties":{
	"order":{"type":"object","properties":{
		"id":{"type":"string","minLength":1,"maxLength":64},
		"placed":{"type":"string","format":"date-time"},
		"lines":{"type":"array","minItems":1,"maxItems":100,"items":{"type":"object","properties":{
			"sku":{"type":"string"},"qty":{"type":"integer","minimum":1},"price":{"type":"number","exclusiveMinimum":0},
			"unit":{"enum":["piece","kg","m"]}},"required":["sku","qty"],"additionalProperties":false}}},
		"required":["id","lines"],"additionalProperties":false},
	"priority":{"type":"string","enum":["low","normal","high"]},
	"notify":{"type":["string","null"],"format":"email"},
	"tags":{"type":"array","items":{"type":"string","maxLength":32}}},
	"required":["order"]}`

const nestedParams = `{"order":{"id":"A-1","placed":"2026-11-27T22:00:00Z","lines":[` +
	`{"sku":"bolt-m8","qty":200,"price":0.12,"unit":"piece"},{"sku":"cable","qty":3,"price":1.5,"unit":"m"}]},` +
	`"priority":"normal","notify":null,"tags":["hardware","urgent"]}`

// TestSchemaCheckCases: the demo tools' schemas and the benchmark's are taken by the
// plain check, and Validate answers each case as the library does, a refusal with
// the library's violations.
func TestSchemaCheckCases(t *testing.T) {
	for _, c := range schemaCheckCases {
		s, err := wire.CompileSchema(json.RawMessage(c.schema), wire.SchemaURL("t", "m"))
		if err != nil {
			t.Fatal(err)
		}
		entry := &MethodEntry{Tool: &Tool{ID: "t"}, Method: &Method{Name: "m"}, schema: &inputSchema{raw: json.RawMessage(c.schema)}}
		got := entry.Validate([]byte(c.params))
		if input, _ := entry.schema.compiled("t", "m"); !input.IsPlain() && !input.AnyObject {
			t.Errorf("%s: not taken by the plain check", c.name)
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(c.params)))
		if err != nil {
			t.Fatal(err)
		}
		want := refusal(s.Validate(v))
		if !reflect.DeepEqual(got, want) || (got == nil) != c.valid {
			t.Errorf("%s: Validate %v, the library %v", c.name, got, want)
		}
	}
}

// BenchmarkSchemaCheck measures the ways to check a call's parameters side by side,
// in one run: "library" decodes them with the library's decoder then validates;
// "current" is the check before the plain one (wire.DecodeInstance, then the library),
// both listing the violations of a refusal as Validate does;
// "google" is github.com/google/jsonschema-go on encoding/json's decoding (it does
// not assert formats, so it checks less, and its refusal is its error alone, no
// violations listed); "plain" is the plain check alone; and
// "Validate" the method entry's check as it is, the plain check in front.
func BenchmarkSchemaCheck(b *testing.B) {
	for _, c := range schemaCheckCases {
		s, err := wire.CompileSchema(json.RawMessage(c.schema), wire.SchemaURL("bench", "m"))
		if err != nil {
			b.Fatal(err)
		}
		params := []byte(c.params)
		gs := googleSchema(b, c.schema)
		plain := wire.Plain(s)
		if plain == nil {
			b.Fatalf("%s: not a plain schema", c.name)
		}
		entry := &MethodEntry{Tool: &Tool{ID: "bench"}, Method: &Method{Name: "m"}, schema: &inputSchema{raw: json.RawMessage(c.schema)}}
		check := func(b *testing.B, f func() bool) {
			b.ReportAllocs()
			for b.Loop() {
				if f() != c.valid {
					b.Fatalf("%s: not %v", c.name, c.valid)
				}
			}
		}
		b.Run(c.name+"/library", func(b *testing.B) {
			check(b, func() bool {
				v, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
				return err == nil && refusal(s.Validate(v)) == nil
			})
		})
		b.Run(c.name+"/current", func(b *testing.B) {
			check(b, func() bool {
				v, err := wire.DecodeInstance(params)
				return err == nil && refusal(s.Validate(v)) == nil
			})
		})
		b.Run(c.name+"/google", func(b *testing.B) {
			check(b, func() bool {
				var v any
				return json.Unmarshal(params, &v) == nil && gs.Validate(v) == nil
			})
		})
		b.Run(c.name+"/plain", func(b *testing.B) {
			if !c.valid {
				b.Skip("the plain check decides only what passes")
			}
			check(b, func() bool { return plain.Accepts(params) })
		})
		b.Run(c.name+"/Validate", func(b *testing.B) {
			check(b, func() bool { return entry.Validate(params) == nil })
		})
	}
}

// refusal is what Validate makes of the library's error: the violations a caller
// is told of.
func refusal(err error) error {
	if err != nil {
		return &ValidationError{Violations: wire.SchemaViolations(err)}
	}
	return nil
}

// googleSchema resolves schema for google/jsonschema-go, closed as wire.CompileSchema
// closes it.
func googleSchema(b *testing.B, schema string) *google.Resolved {
	var gs google.Schema
	if err := json.Unmarshal([]byte(schema), &gs); err != nil {
		b.Fatal(err)
	}
	if gs.Properties != nil && gs.AdditionalProperties == nil {
		gs.AdditionalProperties = &google.Schema{Not: &google.Schema{}}
	}
	r, err := gs.Resolve(nil)
	if err != nil {
		b.Fatal(err)
	}
	return r
}
