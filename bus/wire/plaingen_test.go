package wire_test

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/bus/wire"
)

// FuzzPlainSchemaGenerated holds the plain check to the library on schemas and
// instances built from the fuzzer's bytes out of the keywords the plain check takes,
// so that most inputs compile and meet a schema at its edges (where mutating a
// schema's text mostly makes one that does not compile).
func FuzzPlainSchemaGenerated(f *testing.F) {
	for _, seed := range []string{"", "\x00", "\x06\x03\x01\x02", "\x05\x02\x03\x04\x01\x00\x06", "\x02\x01\x05\x03\x07",
		"\x06\x02\x00\x01\x02\x05\x01\x03\x04", "\x04\x01\x01\x02\x03\x04\x05\x06\x07\x08", "\x00\x03\x02\x01\x07\x06"} {
		f.Add([]byte(seed), []byte(seed))
	}
	f.Fuzz(func(t *testing.T, schemaBytes, instBytes []byte) {
		sg, ig := &gen{b: schemaBytes}, &gen{b: instBytes}
		schema, inst := sg.schema(0), ig.value(0)
		s, err := wire.CompileSchema([]byte(schema), wire.SchemaURL("t", "m"))
		if err != nil {
			return
		}
		p := wire.Plain(s)
		if p != nil && p.Accepts([]byte(inst)) && !libraryAccepts(t, s, inst) {
			t.Fatalf("the plain check accepts %s against %s; the library does not", inst, schema)
		}
	})
}

// gen makes JSON text from bytes, each choice one byte (zero once they run out).
type gen struct {
	b []byte
	i int
}

func (g *gen) next(n int) int {
	if g.i >= len(g.b) {
		return 0
	}
	g.i++
	return int(g.b[g.i-1]) % n
}

func (g *gen) pick(from []string) string { return from[g.next(len(from))] }

var (
	genNumbers = []string{"0", "-0", "1", "1.0", "1.5", "2", "10", "1e1", "1E+1", "-1", "0.5", "1000", "1001",
		"99999999999999999999", "1e400", "-2.5e-3", "9223372036854775807", "123456789012345678"}
	genStrings = []string{`""`, `"a"`, `"ab"`, `"é"`, `"éé"`, `"日本語"`, `"\u00e9"`, `"a\"b"`, `"ada@example.com"`,
		`"not an email"`, `"2026-11-27T22:00:00Z"`, `"\ud83d\ude00"`, "\"\xff\"", `"b"`}
	genNames   = []string{`"a"`, `"b"`, `"é"`, `"\u0061"`, `"a\"b"`}
	genFormats = []string{`"email"`, `"date-time"`, `"uuid"`, `"ipv4"`, `"unknown-format"`}
	genTypes   = []string{`"string"`, `"integer"`, `"number"`, `"boolean"`, `"null"`, `"array"`, `"object"`}
)

func (g *gen) value(depth int) string {
	switch k := g.next(8); {
	case k == 0 || depth > 3 && k >= 6:
		return g.pick(genNumbers)
	case k == 1:
		return g.pick(genStrings)
	case k == 2:
		return g.pick([]string{"true", "false", "null"})
	case k == 3 || k == 4:
		return g.pick(genStrings)
	case k == 5:
		return "[" + g.list(depth, func() string { return g.value(depth + 1) }) + "]"
	default:
		return "{" + g.list(depth, func() string { return g.pick(genNames) + ":" + g.value(depth+1) }) + "}"
	}
}

func (g *gen) list(depth int, item func() string) string {
	var parts []string
	for range g.next(4) {
		parts = append(parts, item())
	}
	return strings.Join(parts, ",")
}

func (g *gen) schema(depth int) string {
	var kw []string
	add := func(k, v string) { kw = append(kw, `"`+k+`":`+v) }
	switch g.next(4) {
	case 1:
		add("type", g.pick(genTypes))
	case 2:
		add("type", "["+g.pick(genTypes)+","+g.pick(genTypes)+"]")
	}
	for range g.next(5) {
		switch g.next(12) {
		case 0:
			add("minLength", g.pick([]string{"0", "1", "2", "3"}))
		case 1:
			add("maxLength", g.pick([]string{"0", "1", "2", "3"}))
		case 2:
			add("enum", "["+g.pick(genStrings)+","+g.pick([]string{"null", "true", "false", `"a"`})+"]")
		case 3:
			add("format", g.pick(genFormats))
		case 4:
			add(g.pick([]string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}), g.pick(genNumbers[:13]))
		case 5:
			add(g.pick([]string{"minItems", "maxItems"}), g.pick([]string{"0", "1", "2"}))
		case 6:
			if depth < 3 {
				add("items", g.schema(depth+1))
			}
		case 7, 8:
			if depth < 3 {
				add("properties", "{"+g.list(depth, func() string { return g.pick(genNames) + ":" + g.schema(depth+1) })+"}")
			}
		case 9:
			add("required", "["+g.list(depth, func() string { return g.pick(genNames) })+"]")
		case 10:
			if depth < 3 {
				add("additionalProperties", g.pick([]string{"true", "false", g.schema(depth + 1)}))
			}
		case 11:
			add("$schema", `"http://json-schema.org/draft-07/schema#"`)
		}
	}
	return "{" + strings.Join(kw, ",") + "}"
}
