package wire

import (
	"encoding/json"
	"errors"
)

// DecodeInstance decodes the JSON document b as jsonschema.UnmarshalJSON does (objects
// as map[string]any, arrays as []any, numbers as json.Number, a repeated key keeping
// its last value), without a json.Decoder and its reflection: a call's parameters are
// decoded so for the schema library when the plain check leaves them to it. A
// document that is not JSON is an error, which does not say why (the library's
// decoder does).
func DecodeInstance(b []byte) (any, error) {
	d := instanceDecoder{jsonScan{b: b}}
	v, ok := d.value()
	if !ok || !d.end() {
		return nil, errNotInstance
	}
	return v, nil
}

var errNotInstance = errors.New("invalid JSON")

type instanceDecoder struct{ jsonScan }

func (d *instanceDecoder) value() (any, bool) {
	d.skipSpace()
	if d.i >= len(d.b) {
		return nil, false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		return d.text()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		raw, _, _, ok := d.number()
		return json.Number(raw), ok
	}
	return nil, false
}

func (d *instanceDecoder) object() (any, bool) {
	if !d.enter() {
		return nil, false
	}
	m := map[string]any{}
	more := !d.empty('}')
	for more {
		k, ok := d.text()
		if !ok || !d.colon() {
			return nil, false
		}
		v, ok := d.value()
		if !ok {
			return nil, false
		}
		m[k] = v
		if more, ok = d.after('}'); !ok {
			return nil, false
		}
	}
	d.leave()
	return m, true
}

func (d *instanceDecoder) array() (any, bool) {
	if !d.enter() {
		return nil, false
	}
	a := []any{}
	more := !d.empty(']')
	for more {
		v, ok := d.value()
		if !ok {
			return nil, false
		}
		a = append(a, v)
		if more, ok = d.after(']'); !ok {
			return nil, false
		}
	}
	d.leave()
	return a, true
}

// text decodes the string at d.i: a plain one is copied as it is, one with escapes
// or invalid UTF-8 is left to encoding/json.
func (d *instanceDecoder) text() (string, bool) {
	raw, plain, ok := d.stringBytes()
	if !ok {
		return "", false
	}
	if plain {
		return string(raw), true
	}
	return d.unquote(raw)
}
