package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// A method's input schema is shown twice on the API tab: as a table of its fields,
// and as an example call to start the try-it form from. Both keep the order in which
// the schema lists its properties, which is the order its author meant them read in,
// so the schema is decoded into ordered objects rather than Go maps.

// object is a JSON object that remembers the order of its members.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(key string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.vals[key]
	return v, ok
}

func (o *object) str(key string) string {
	v, _ := o.get(key)
	s, _ := v.(string)
	return s
}

func (o *object) obj(key string) *object {
	v, _ := o.get(key)
	m, _ := v.(*object)
	return m
}

func (o *object) list(key string) []any {
	v, _ := o.get(key)
	l, _ := v.([]any)
	return l
}

func (o *object) set(key string, v any) {
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
}

func newObject() *object { return &object{vals: map[string]any{}} }

// decodeOrdered reads one JSON value: objects as *object, arrays as []any, numbers
// as json.Number.
func decodeOrdered(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("unexpected data after the value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := newObject()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				o.set(k.(string), v)
			}
			_, err := dec.Token()
			return o, err
		case '[':
			l := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			_, err := dec.Token()
			return l, err
		}
	}
	return tok, nil
}

// encodeOrdered writes v as indented JSON, objects in their order.
func encodeOrdered(v any) string {
	var b bytes.Buffer
	writeOrdered(&b, v)
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return b.String()
	}
	return out.String()
}

func writeOrdered(b *bytes.Buffer, v any) {
	switch t := v.(type) {
	case *object:
		b.WriteByte('{')
		for i, k := range t.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			writeOrdered(b, t.vals[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			writeOrdered(b, e)
		}
		b.WriteByte(']')
	default:
		vb, err := json.Marshal(t)
		if err != nil {
			vb = []byte("null")
		}
		b.Write(vb)
	}
}

// schema is a method's input schema with its local references resolvable.
type schema struct {
	root *object
}

func parseSchema(raw json.RawMessage) (*schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return &schema{root: newObject()}, nil
	}
	v, err := decodeOrdered(raw)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	root, ok := v.(*object)
	if !ok {
		// true, false: any object, or none; nothing to list.
		return &schema{root: newObject()}, nil
	}
	return &schema{root: root}, nil
}

// maxDepth bounds how far nested and recursive schemas are followed.
const maxDepth = 6

// resolve follows a local $ref ("#/$defs/x"); other references are left as they are.
func (s *schema) resolve(o *object) *object {
	for range maxDepth {
		ref := o.str("$ref")
		if !strings.HasPrefix(ref, "#") {
			return o
		}
		target := s.pointer(strings.TrimPrefix(ref, "#"))
		if target == nil {
			return o
		}
		o = target
	}
	return o
}

func (s *schema) pointer(p string) *object {
	var cur any = s.root
	if p == "" {
		return s.root
	}
	for _, tok := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch c := cur.(type) {
		case *object:
			cur, _ = c.get(tok)
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	o, _ := cur.(*object)
	return o
}

// field is one row of a method's parameter table.
type field struct {
	Name        string // a path: "to", "address.city", "items[].id"
	Type        string
	Required    bool
	Description string
	Format      string // format and constraints, in words
}

// fields lists the schema's properties, nested ones after their parent.
func (s *schema) fields() []field {
	var out []field
	s.collect(&out, "", s.resolve(s.root), 0)
	return out
}

func (s *schema) collect(out *[]field, prefix string, o *object, depth int) {
	props := o.obj("properties")
	if props == nil || depth > maxDepth {
		return
	}
	required := map[string]bool{}
	for _, r := range o.list("required") {
		if name, ok := r.(string); ok {
			required[name] = true
		}
	}
	for _, name := range props.keys {
		p, _ := props.vals[name].(*object)
		if p == nil {
			p = newObject() // true: anything goes
		}
		p = s.resolve(p)
		*out = append(*out, field{
			Name:        prefix + name,
			Type:        s.typeName(p, 0),
			Required:    required[name],
			Description: firstNonEmpty(p.str("description"), p.str("title")),
			Format:      constraints(p),
		})
		switch {
		case p.obj("properties") != nil:
			s.collect(out, prefix+name+".", p, depth+1)
		case p.obj("items") != nil:
			if items := s.resolve(p.obj("items")); items.obj("properties") != nil {
				s.collect(out, prefix+name+"[].", items, depth+1)
			}
		}
	}
}

// typeName says in words what type a value must have.
func (s *schema) typeName(o *object, depth int) string {
	o = s.resolve(o)
	if depth > maxDepth {
		return "any"
	}
	var types []string
	switch t := o.vals["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, e := range t {
			if name, ok := e.(string); ok {
				types = append(types, name)
			}
		}
	}
	if len(types) == 0 {
		for _, key := range []string{"anyOf", "oneOf"} {
			for _, alt := range o.list(key) {
				if a, ok := alt.(*object); ok {
					types = append(types, s.typeName(a, depth+1))
				}
			}
		}
	}
	if len(types) == 0 {
		switch {
		case o.obj("properties") != nil:
			types = []string{"object"}
		case o.obj("items") != nil:
			types = []string{"array"}
		case len(o.list("enum")) > 0:
			types = []string{jsonType(o.list("enum")[0])}
		default:
			if c, ok := o.get("const"); ok {
				types = []string{jsonType(c)}
			}
		}
	}
	if len(types) == 0 {
		return "any"
	}
	for i, t := range types {
		if t == "array" {
			if items := o.obj("items"); items != nil {
				types[i] = "array of " + s.typeName(items, depth+1)
			}
		}
	}
	return strings.Join(slices.Compact(types), " or ")
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case *object:
		return "object"
	case []any:
		return "array"
	}
	return "null"
}

// constraints says what else a value must be: its format, allowed values, bounds.
func constraints(o *object) string {
	var parts []string
	if f := o.str("format"); f != "" {
		parts = append(parts, f)
	}
	if enum := o.list("enum"); len(enum) > 0 {
		vals := make([]string, len(enum))
		for i, e := range enum {
			vals[i] = encodeOrdered(e)
		}
		parts = append(parts, "one of "+strings.Join(vals, ", "))
	}
	if c, ok := o.get("const"); ok {
		parts = append(parts, "exactly "+encodeOrdered(c))
	}
	if p := o.str("pattern"); p != "" {
		parts = append(parts, "matches "+p)
	}
	bounds := []struct{ key, words string }{
		{"minLength", "at least %s characters"},
		{"maxLength", "at most %s characters"},
		{"minimum", "≥ %s"},
		{"exclusiveMinimum", "> %s"},
		{"maximum", "≤ %s"},
		{"exclusiveMaximum", "< %s"},
		{"minItems", "at least %s items"},
		{"maxItems", "at most %s items"},
		{"default", "default %s"},
	}
	for _, b := range bounds {
		if v, ok := o.get(b.key); ok {
			parts = append(parts, fmt.Sprintf(b.words, encodeOrdered(v)))
		}
	}
	return strings.Join(parts, "; ")
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// example builds a parameter object for the try-it form: the schema's own examples
// and defaults where it gives them, plausible values of the right type and format
// elsewhere. It fills the required fields, or every field when none is required, so
// that the example as it stands is a call the method accepts.
func (s *schema) example() string {
	v := s.exampleValue(s.root, "", 0)
	if _, ok := v.(*object); !ok {
		v = newObject()
	}
	return encodeOrdered(v)
}

func (s *schema) exampleValue(o *object, name string, depth int) any {
	o = s.resolve(o)
	if depth > maxDepth {
		return nil
	}
	if ex := o.list("examples"); len(ex) > 0 {
		return ex[0]
	}
	for _, key := range []string{"const", "default", "example"} {
		if v, ok := o.get(key); ok {
			return v
		}
	}
	if enum := o.list("enum"); len(enum) > 0 {
		return enum[0]
	}
	t := s.primaryType(o)
	switch t {
	case "object":
		out := newObject()
		props := o.obj("properties")
		if props == nil {
			return out
		}
		required := map[string]bool{}
		for _, r := range o.list("required") {
			if n, ok := r.(string); ok {
				required[n] = true
			}
		}
		for _, key := range props.keys {
			if len(required) > 0 && !required[key] {
				continue
			}
			p, _ := props.vals[key].(*object)
			if p == nil {
				p = newObject()
			}
			out.set(key, s.exampleValue(p, key, depth+1))
		}
		return out
	case "array":
		l := []any{}
		items := o.obj("items")
		n, _ := intValue(o, "minItems")
		for range min(n, 3) {
			if items == nil {
				l = append(l, nil)
			} else {
				l = append(l, s.exampleValue(items, name, depth+1))
			}
		}
		return l
	case "string":
		return exampleString(o, name)
	case "integer", "number":
		return exampleNumber(o, t == "integer")
	case "boolean":
		return false
	}
	return nil
}

// primaryType is the first type a schema allows other than null.
func (s *schema) primaryType(o *object) string {
	switch t := o.vals["type"].(type) {
	case string:
		return t
	case []any:
		for _, e := range t {
			if name, ok := e.(string); ok && name != "null" {
				return name
			}
		}
		return "null"
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		for _, alt := range o.list(key) {
			if a, ok := alt.(*object); ok {
				if t := s.primaryType(s.resolve(a)); t != "null" && t != "" {
					return t
				}
			}
		}
	}
	switch {
	case o.obj("properties") != nil:
		return "object"
	case o.obj("items") != nil:
		return "array"
	}
	return ""
}

var formatExamples = map[string]string{
	"email":         "user@example.com",
	"idn-email":     "user@example.com",
	"date-time":     "2026-01-15T09:30:00Z",
	"date":          "2026-01-15",
	"time":          "09:30:00Z",
	"duration":      "PT1H",
	"uri":           "https://example.com/",
	"url":           "https://example.com/",
	"iri":           "https://example.com/",
	"uri-reference": "https://example.com/",
	"hostname":      "example.com",
	"idn-hostname":  "example.com",
	"ipv4":          "192.0.2.1",
	"ipv6":          "2001:db8::1",
	"uuid":          "3f2504e0-4f89-41d3-9a0c-0305e82c3301",
	"regex":         ".*",
	"json-pointer":  "/a",
}

func exampleString(o *object, name string) string {
	if ex, ok := formatExamples[o.str("format")]; ok {
		return ex
	}
	s := "example"
	if name != "" {
		s = "example " + name
	}
	if n, ok := intValue(o, "minLength"); ok && n > len(s) {
		s += strings.Repeat("x", int(min(n, 256))-len(s))
	}
	if n, ok := intValue(o, "maxLength"); ok && n < len(s) {
		s = s[:max(n, 0)]
	}
	return s
}

func exampleNumber(o *object, integer bool) json.Number {
	lo, hasLo := intValue(o, "minimum")
	if xlo, ok := intValue(o, "exclusiveMinimum"); ok {
		lo, hasLo = xlo+1, true
	}
	v := 0
	if hasLo {
		v = lo
	}
	if hi, ok := intValue(o, "maximum"); ok && v > hi {
		v = hi
	}
	if hi, ok := intValue(o, "exclusiveMaximum"); ok && v >= hi {
		v = hi - 1
	}
	if !integer && v == 0 && !hasLo {
		return "0"
	}
	return json.Number(strconv.Itoa(v))
}

// intValue reads a numeric keyword, rounded up to an integer.
func intValue(o *object, key string) (int, bool) {
	n, ok := o.vals[key].(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil {
		return 0, false
	}
	i := int(f)
	if float64(i) < f {
		i++
	}
	return i, true
}
