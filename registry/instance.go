package registry

import (
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// decodeInstance decodes the JSON document b as jsonschema.UnmarshalJSON does (objects
// as map[string]any, arrays as []any, numbers as json.Number, a repeated key keeping
// its last value), without a json.Decoder and its reflection: every call's parameters
// are decoded to be validated. b must be valid JSON (IsObject's check); a document
// that is not is an error.
func decodeInstance(b []byte) (any, error) {
	d := instanceDecoder{b: b}
	v, err := d.value()
	if err != nil {
		return nil, err
	}
	if d.skipSpace(); d.i != len(d.b) {
		return nil, errNotInstance
	}
	return v, nil
}

var errNotInstance = errors.New("invalid JSON")

type instanceDecoder struct {
	b     []byte
	i     int
	depth int
}

// maxInstanceDepth is encoding/json's bound on nesting, which IsObject applies.
const maxInstanceDepth = 10000

func (d *instanceDecoder) enter() error {
	if d.depth++; d.depth > maxInstanceDepth {
		return errNotInstance
	}
	return nil
}

func (d *instanceDecoder) skipSpace() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\r', '\n':
			d.i++
		default:
			return
		}
	}
}

func (d *instanceDecoder) value() (any, error) {
	d.skipSpace()
	if d.i >= len(d.b) {
		return nil, errNotInstance
	}
	switch c := d.b[d.i]; {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		return d.string()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return nil, errNotInstance
}

// number reads a number as RFC 8259 writes it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *instanceDecoder) number() (any, error) {
	start := d.i
	if d.b[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.b) && d.b[d.i] == '0':
		d.i++
	case d.digits() == 0:
		return nil, errNotInstance
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if d.digits() == 0 {
			return nil, errNotInstance
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if d.digits() == 0 {
			return nil, errNotInstance
		}
	}
	return json.Number(d.b[start:d.i]), nil
}

func (d *instanceDecoder) digits() int {
	start := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i - start
}

func (d *instanceDecoder) literal(word string) error {
	if len(d.b)-d.i < len(word) || string(d.b[d.i:d.i+len(word)]) != word {
		return errNotInstance
	}
	d.i += len(word)
	return nil
}

func (d *instanceDecoder) object() (any, error) {
	d.i++ // {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer func() { d.depth-- }()
	m := map[string]any{}
	d.skipSpace()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		return m, nil
	}
	for {
		d.skipSpace()
		if d.i >= len(d.b) || d.b[d.i] != '"' {
			return nil, errNotInstance
		}
		k, err := d.string()
		if err != nil {
			return nil, err
		}
		d.skipSpace()
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			return nil, errNotInstance
		}
		d.i++
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		m[k] = v
		if more, err := d.after('}'); !more {
			return m, err
		}
	}
}

func (d *instanceDecoder) array() (any, error) {
	d.i++ // [
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer func() { d.depth-- }()
	a := []any{}
	d.skipSpace()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		return a, nil
	}
	for {
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		if more, err := d.after(']'); !more {
			return a, err
		}
	}
}

// after reads what follows a member or an element: a comma, more to come, or the
// bracket that closes them.
func (d *instanceDecoder) after(closing byte) (more bool, err error) {
	d.skipSpace()
	switch {
	case d.i >= len(d.b):
	case d.b[d.i] == ',':
		d.i++
		return true, nil
	case d.b[d.i] == closing:
		d.i++
		return false, nil
	}
	return false, errNotInstance
}

// string decodes the string at d.i: a plain one is copied as it is, one with escapes
// is left to encoding/json.
func (d *instanceDecoder) string() (string, error) {
	start := d.i
	d.i++ // "
	plain := true
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			if plain {
				return string(d.b[start+1 : d.i-1]), nil
			}
			var s string
			if err := json.Unmarshal(d.b[start:d.i], &s); err != nil {
				return "", errNotInstance
			}
			return s, nil
		case c == '\\':
			plain = false
			d.i += 2
		case c < 0x20:
			return "", errNotInstance
		case c >= utf8.RuneSelf:
			plain = false // encoding/json replaces invalid UTF-8: let it
			d.i++
		default:
			d.i++
		}
	}
	return "", errNotInstance
}
