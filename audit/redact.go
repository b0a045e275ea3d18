package audit

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// SecretMarker is the keyword with which a method's schema marks a field secret, as
// JSON Schema's writeOnly (true) does: either keeps the field's value out of the
// audit trail.
const SecretMarker = "x-secret"

// Kept is what a record keeps of a call's arguments or result: the JSON without its
// secret fields, or, when that is longer than the account's bound, its first bytes as
// a JSON string, cut.
type Kept struct {
	Data json.RawMessage
	// Cut says Data is a JSON string holding the first bytes of the JSON text, which
	// had Size bytes.
	Cut  bool
	Size int
	// Secret are the JSON pointers of the values left out.
	Secret []string
}

// Keep is what a record keeps of data, a call's arguments or result that schema (its
// method's input or output schema; nil for none) describes: every value the schema
// marks secret (writeOnly or x-secret true, in properties, items, additional and
// pattern properties, through $ref within the schema and allOf, anyOf and oneOf) left
// out, an object's member removed and an array's element made null, then cut at max
// bytes. Data that is not JSON is kept as a JSON string when the schema marks nothing
// secret, and not at all otherwise.
//
// A result that is an MCP CallToolResult (mcpResult) is walked with the schema as its
// structuredContent's; when the schema marks anything secret, its content (text that
// may repeat the structured values) is left out too.
func Keep(data []byte, schema json.RawMessage, max int, mcpResult bool) Kept {
	s := compiledSchema(schema)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		if s.secrets {
			return Kept{Size: len(data), Secret: []string{""}}
		}
		text := strings.ToValidUTF8(string(data), "\uFFFD")
		return cut(mustJSON(text), max)
	}
	w := walker{root: s.root}
	top := w.expand(s.root, 0)
	if mcpResult {
		props := map[string]any{}
		if s.root != nil {
			props["structuredContent"] = s.root
		}
		if s.secrets {
			props["content"] = map[string]any{SecretMarker: true}
		}
		top = []map[string]any{{"properties": props}}
	}
	v, _ = w.walk(v, top, "")
	k := cut(mustJSON(v), max)
	k.Secret = w.left
	return k
}

// cut keeps b whole when it fits in max bytes, and otherwise its first max bytes (at
// a character's boundary) as a JSON string.
func cut(b []byte, max int) Kept {
	if len(b) <= max {
		return Kept{Data: b, Size: len(b)}
	}
	n := max
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return Kept{Data: mustJSON(string(b[:n])), Cut: true, Size: len(b)}
}

func mustJSON(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage(`null`) // a decoded value always encodes
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// schemaInfo is a schema decoded once, and whether it marks anything secret.
type schemaInfo struct {
	root    map[string]any
	secrets bool
}

// schemas holds the schemas decoded, by their bytes: the methods' schemas are few.
var schemas sync.Map

func compiledSchema(raw json.RawMessage) *schemaInfo {
	if len(raw) == 0 {
		return &schemaInfo{}
	}
	if s, ok := schemas.Load(string(raw)); ok {
		return s.(*schemaInfo)
	}
	s := &schemaInfo{}
	if json.Unmarshal(raw, &s.root) == nil {
		s.secrets = bytes.Contains(raw, []byte(`"writeOnly"`)) || bytes.Contains(raw, []byte(`"`+SecretMarker+`"`))
	} else {
		s.secrets = true // a schema that is not JSON: keep nothing that could be secret
	}
	schemas.Store(string(raw), s)
	return s
}

// walker leaves the secret values out of a value, naming where.
type walker struct {
	root map[string]any
	left []string
}

// maxDepth bounds following $ref and the combinators, against a schema that refers
// to itself.
const maxDepth = 32

// expand is s with the schemas it refers to ($ref within the root) and combines
// (allOf, anyOf, oneOf), each of which applies to the same value.
func (w *walker) expand(s any, depth int) []map[string]any {
	m, ok := s.(map[string]any)
	if !ok || depth > maxDepth {
		return nil
	}
	out := []map[string]any{m}
	if ref, ok := m["$ref"].(string); ok {
		out = append(out, w.expand(w.resolve(ref), depth+1)...)
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if list, ok := m[k].([]any); ok {
			for _, sub := range list {
				out = append(out, w.expand(sub, depth+1)...)
			}
		}
	}
	return out
}

// resolve finds a $ref of the form #/a/b within the root schema; nil otherwise.
func (w *walker) resolve(ref string) any {
	if !strings.HasPrefix(ref, "#") {
		return nil
	}
	var at any = w.root
	for _, tok := range strings.Split(strings.TrimPrefix(ref, "#"), "/")[1:] {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := at.(map[string]any)
		if !ok {
			return nil
		}
		at = m[tok]
	}
	return at
}

func secret(s map[string]any) bool { return s["writeOnly"] == true || s[SecretMarker] == true }

// walk returns v without its secret values, and false when v itself is secret.
func (w *walker) walk(v any, schemas []map[string]any, at string) (any, bool) {
	for _, s := range schemas {
		if secret(s) {
			return nil, false
		}
	}
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			var sub []map[string]any
			for _, s := range schemas {
				sub = append(sub, w.member(s, k)...)
			}
			if nv, keep := w.walk(child, sub, at+"/"+escape(k)); keep {
				v[k] = nv
			} else {
				delete(v, k)
				w.left = append(w.left, at+"/"+escape(k))
			}
		}
	case []any:
		for i, el := range v {
			var sub []map[string]any
			for _, s := range schemas {
				sub = append(sub, w.element(s, i)...)
			}
			if nv, keep := w.walk(el, sub, at+"/"+itoa(i)); keep {
				v[i] = nv
			} else {
				v[i] = nil
				w.left = append(w.left, at+"/"+itoa(i))
			}
		}
	}
	return v, true
}

// member is the schemas of s that apply to its object's member k.
func (w *walker) member(s map[string]any, k string) []map[string]any {
	if props, ok := s["properties"].(map[string]any); ok {
		if p, ok := props[k]; ok {
			return w.expand(p, 0)
		}
	}
	var out []map[string]any
	if pats, ok := s["patternProperties"].(map[string]any); ok {
		for pat, p := range pats {
			if re, err := regexp.Compile(pat); err == nil && re.MatchString(k) {
				out = append(out, w.expand(p, 0)...)
			}
		}
	}
	if len(out) == 0 {
		out = w.expand(s["additionalProperties"], 0)
	}
	return out
}

// element is the schemas of s that apply to its array's element i.
func (w *walker) element(s map[string]any, i int) []map[string]any {
	if prefix, ok := s["prefixItems"].([]any); ok && i < len(prefix) {
		return w.expand(prefix[i], 0)
	}
	if tuple, ok := s["items"].([]any); ok { // draft 4 to 2019-09's tuple
		if i < len(tuple) {
			return w.expand(tuple[i], 0)
		}
		return w.expand(s["additionalItems"], 0)
	}
	return w.expand(s["items"], 0)
}

func escape(k string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(k) }

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
