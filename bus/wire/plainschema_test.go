package wire_test

import (
	"bytes"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/bus/wire"
)

// libraryAccepts is the check a PlainSchema stands in for: the instance decoded by
// the library's decoder, then validated by the library.
func libraryAccepts(t testing.TB, s *jsonschema.Schema, inst string) bool {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(inst)))
	return err == nil && s.Validate(v) == nil
}

func compile(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	s, err := wire.CompileSchema([]byte(schema), wire.SchemaURL("t", "m"))
	if err != nil {
		t.Fatalf("%s: %v", schema, err)
	}
	return s
}

// plainCases hold, for each keyword, instances at its edges: whether the library
// accepts each, and whether the plain check is sure of it (it never is of a refusal).
var plainCases = []struct {
	name, schema string
	insts        []plainInst
}{
	{"integer", `{"type":"integer"}`, []plainInst{
		{`1`, true, true}, {`-0`, true, true}, {`1.0`, true, true}, {`1e2`, true, true}, {`1.5`, false, false},
		{`"1"`, false, false}, {`null`, false, false}, {`123456789012345678901234567890`, true, true}, {`1e99999`, true, false},
	}},
	{"number bounds", `{"type":"number","minimum":1,"maximum":1000}`, []plainInst{
		{`0`, false, false}, {`1`, true, true}, {`1000`, true, true}, {`1001`, false, false}, {`1000.5`, false, false},
		{`999.5`, true, true}, {`0.99999`, false, false}, {`1e3`, true, true}, {`10000e-1`, true, true}, {`-5`, false, false},
	}},
	{"integer bounds", `{"type":"integer","minimum":1.5,"exclusiveMaximum":10}`, []plainInst{
		{`1`, false, false}, {`2`, true, true}, {`9`, true, true}, {`10`, false, false}, {`9.0`, true, true}, {`9.5`, false, false},
	}},
	{"exclusive minimum", `{"exclusiveMinimum":0}`, []plainInst{
		{`0`, false, false}, {`0.0001`, true, true}, {`-1`, false, false}, {`"x"`, true, true}, {`99999999999999999999`, true, true},
	}},
	{"lengths in runes", `{"type":"string","minLength":2,"maxLength":3}`, []plainInst{
		{`"héé"`, true, true}, {`"abcd"`, false, false}, {`"a"`, false, false}, {`"\u00e9\u00e9"`, true, true},
		{`"ab\n"`, true, true}, {`"日本語"`, true, true}, {`"日本語x"`, false, false}, {"\"a\xffb\"", true, true},
		{"\"a\xff\xfeb\"", false, false}, {`"a\"`, false, false}, {`"a\x"`, false, false}, {"\"a\tb\"", false, false},
	}},
	{"enum", `{"enum":["a","b",null,true]}`, []plainInst{
		{`"a"`, true, true}, {`"c"`, false, false}, {`null`, true, true}, {`true`, true, true}, {`false`, false, false},
		{`1`, false, false}, {`"\u0061"`, true, true}, {`["a"]`, false, false},
	}},
	{"object", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":["integer","null"]}},"required":["a"]}`, []plainInst{
		{`{"a":"x"}`, true, true}, {`{"a":"x","b":null}`, true, true}, {`{"a":"x","b":2}`, true, true}, {`{"b":2}`, false, false},
		{`{"a":"x","c":1}`, false, false}, {`{"a":1,"a":"x"}`, true, false}, {`{"a":"x","a":1}`, false, false},
		{`{"\u0061":"x"}`, true, true}, {` {"a" : "x" } `, true, true}, {`{"a":"x",}`, false, false}, {`{"a":"x"} x`, false, false},
		{`{"a":"x","b":1.0}`, true, true}, {`{"a":"x","b":"2"}`, false, false}, {`[]`, false, false}, {``, false, false},
	}},
	{"open object", `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"},"required":["a","z"]}`, []plainInst{
		{`{"a":"x","z":1}`, true, true}, {`{"a":"x","z":"1"}`, false, false}, {`{"a":"x"}`, false, false}, {`{"a":"x","z":1,"y":[1]}`, false, false},
	}},
	{"arrays", `{"type":"array","items":{"type":"object","properties":{"k":{"enum":["x","y"]}}},"minItems":1,"maxItems":2}`, []plainInst{
		{`[{"k":"x"}]`, true, true}, {`[]`, false, false}, {`[{},{"k":"y"}]`, true, true}, {`[{},{},{}]`, false, false},
		{`[{"k":"z"}]`, false, false}, {`[{"j":1}]`, true, true}, {`[{"k":"x"},]`, false, false},
	}},
	{"draft-07 items", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","items":{"type":"string","maxLength":1}}`, []plainInst{
		{`["a","b"]`, true, true}, {`["ab"]`, false, false},
	}},
	{"format", `{"type":"object","properties":{"to":{"type":"string","format":"email"},"at":{"format":"date-time"}}}`, []plainInst{
		{`{"to":"ada@example.com"}`, true, true}, {`{"to":"ada"}`, false, false}, {`{"at":"2026-11-27T22:00:00Z"}`, true, true},
		{`{"at":"yesterday"}`, false, false}, {`{"at":5}`, true, true},
	}},
	{"nulls and any", `{"type":"object","properties":{"n":{"type":"null"},"any":{},"t":true}}`, []plainInst{
		{`{"n":null,"any":{"deep":[1,{"x":null}]},"t":[]}`, true, true}, {`{"n":0}`, false, false}, {`{"any":[1,}`, false, false},
		{`{"any":nul}`, false, false}, {`{"any":01}`, false, false}, {`{"any":-}`, false, false}, {`{"any":1.}`, false, false},
	}},
}

type plainInst struct {
	json        string
	valid, sure bool
}

func TestPlainSchemaKeywordEdges(t *testing.T) {
	for _, c := range plainCases {
		s := compile(t, c.schema)
		p := wire.Plain(s)
		if p == nil {
			t.Fatalf("%s: %s is not taken as plain", c.name, c.schema)
		}
		for _, in := range c.insts {
			if got := libraryAccepts(t, s, in.json); got != in.valid {
				t.Errorf("%s: the library's answer to %s: %v, want %v", c.name, in.json, got, in.valid)
			}
			if got := p.Accepts([]byte(in.json)); got != in.sure {
				t.Errorf("%s: Accepts(%s) = %v, want %v", c.name, in.json, got, in.sure)
			}
		}
	}
}

// The keywords a PlainSchema does not check leave the whole schema to the library.
func TestPlainSchemaLeavesOtherKeywords(t *testing.T) {
	for _, schema := range []string{
		`{"type":"string","pattern":"^a"}`,
		`{"$defs":{"x":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/x"}}}`,
		`{"oneOf":[{"type":"string"},{"type":"integer"}]}`,
		`{"type":"object","properties":{"a":{"anyOf":[{"type":"string"}]}}}`,
		`{"type":"object","minProperties":1}`,
		`{"type":"array","uniqueItems":true}`,
		`{"type":"array","prefixItems":[{"type":"string"}]}`,
		`{"enum":[1,2]}`,
		`{"const":"a"}`,
		`{"type":"number","multipleOf":2}`,
		`{"type":"object","patternProperties":{"^x":{}}}`,
		`{"not":{}}`,
		`{"type":"string","format":"regex"}`,
		`false`,
	} {
		if wire.Plain(compile(t, schema)) != nil {
			t.Errorf("%s is taken as plain", schema)
		}
	}
	if wire.Plain(nil) != nil {
		t.Error("no schema is taken as plain")
	}
}

// FuzzPlainSchemaAgrees holds that an instance the plain check accepts the library
// accepts too, for schemas and instances the fuzzer makes from the seeds below.
func FuzzPlainSchemaAgrees(f *testing.F) {
	for _, c := range plainCases {
		for _, in := range c.insts {
			f.Add(c.schema, in.json)
		}
	}
	f.Fuzz(func(t *testing.T, schema, inst string) {
		s, err := wire.CompileSchema([]byte(schema), wire.SchemaURL("t", "m"))
		if err != nil {
			return
		}
		p := wire.Plain(s)
		if p == nil || !p.Accepts([]byte(inst)) {
			return
		}
		if !libraryAccepts(t, s, inst) {
			t.Fatalf("the plain check accepts %q against %s; the library does not", inst, schema)
		}
	})
}
