package wire

import (
	"encoding/json"
	"math/big"
	"strconv"
	"unicode/utf8"
)

// Accepts reports whether b is a JSON document that the library, given b decoded as
// jsonschema.UnmarshalJSON decodes it, would find valid against the schema. False
// means "not sure": the library decides, and says why.
//
// A repeated member is checked each time it appears: the decoded object keeps its
// last value, which then was checked too.
func (p *PlainSchema) Accepts(b []byte) bool {
	sc := plainScan{jsonScan{b: b}}
	return sc.value(p.root) && sc.end()
}

// plainScan checks each value of a JSON document against its schema as it reads it.
type plainScan struct{ jsonScan }

// anyValue is the schema of a value nothing is asked of.
var anyValue = plainNode{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}

func (n *plainNode) takes(t uint8) bool { return n.types == 0 || n.types&t != 0 }

func (sc *plainScan) value(n *plainNode) bool {
	if n == nil {
		n = &anyValue
	}
	sc.skipSpace()
	if sc.i >= len(sc.b) {
		return false
	}
	switch c := sc.b[sc.i]; {
	case c == '{':
		return n.takes(plainObject) && n.enum == nil && n.format == nil && sc.object(n)
	case c == '[':
		return n.takes(plainArray) && n.enum == nil && n.format == nil && sc.array(n)
	case c == '"':
		return n.takes(plainString) && sc.string(n)
	case c == 't':
		return n.takes(plainBoolean) && (n.enum == nil || n.enum.isTrue) && n.formatTakes(true) && sc.literal("true")
	case c == 'f':
		return n.takes(plainBoolean) && (n.enum == nil || n.enum.isFalse) && n.formatTakes(false) && sc.literal("false")
	case c == 'n':
		return n.takes(plainNull) && (n.enum == nil || n.enum.null) && n.formatTakes(nil) && sc.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return n.enum == nil && sc.number(n)
	}
	return false
}

// formatTakes runs the library's own check of the format, as it would on v.
func (n *plainNode) formatTakes(v any) bool { return n.format == nil || n.format(v) == nil }

func (sc *plainScan) object(n *plainNode) bool {
	if !sc.enter() {
		return false
	}
	var seen uint64
	more := !sc.empty('}')
	for more {
		raw, plain, ok := sc.stringBytes()
		if !ok {
			return false
		}
		var f plainField
		if plain {
			f = n.fields[string(raw)]
		} else if name, ok := sc.unquote(raw); ok {
			f = n.fields[name]
		} else {
			return false
		}
		if !sc.colon() {
			return false
		}
		sub := n.additional
		switch {
		case f.known:
			sub = f.node
		case n.closed:
			return false
		}
		seen |= f.bit
		if !sc.value(sub) {
			return false
		}
		if more, ok = sc.after('}'); !ok {
			return false
		}
	}
	sc.leave()
	return seen&n.required == n.required
}

func (sc *plainScan) array(n *plainNode) bool {
	if !sc.enter() {
		return false
	}
	count := 0
	more := !sc.empty(']')
	for more {
		if !sc.value(n.items) {
			return false
		}
		count++
		var ok bool
		if more, ok = sc.after(']'); !ok {
			return false
		}
	}
	sc.leave()
	return (n.minItems < 0 || count >= n.minItems) && (n.maxItems < 0 || count <= n.maxItems)
}

func (sc *plainScan) string(n *plainNode) bool {
	raw, plain, ok := sc.stringBytes()
	if !ok {
		return false
	}
	if n.enum == nil && n.format == nil && n.minLen < 0 && n.maxLen < 0 {
		return true
	}
	if !plain { // escapes, or bytes encoding/json replaces: the value is the decoded one
		s, ok := sc.unquote(raw)
		if !ok {
			return false
		}
		raw = []byte(s)
	}
	// string(raw) as a map key or in a comparison is not copied; only the format's
	// function takes a string of its own.
	if n.enum != nil && !n.enum.strings[string(raw)] {
		return false
	}
	if n.minLen >= 0 || n.maxLen >= 0 {
		runes := utf8.RuneCount(raw)
		if n.minLen >= 0 && runes < n.minLen || n.maxLen >= 0 && runes > n.maxLen {
			return false
		}
	}
	return n.format == nil || n.formatTakes(string(raw))
}

// number checks the number at sc.i against its schema: an integer of up to 18
// digits written plainly against int64 bounds, any other number by its exact value,
// as the library does.
func (sc *plainScan) number(n *plainNode) bool {
	raw, whole, expDigits, ok := sc.jsonScan.number()
	if !ok {
		return false
	}
	if n.format != nil && !n.formatTakes(json.Number(raw)) {
		return false
	}
	if n.types != 0 && n.types&(plainNumber|plainInteger) == 0 {
		return false
	}
	needsInteger := n.types != 0 && n.types&plainNumber == 0
	if whole && len(raw) <= 18 { // at most 18 digits: always an int64
		if n.numbers == nil {
			return true
		}
		v, err := strconv.ParseInt(string(raw), 10, 64)
		return err == nil && n.numbers.intMin <= v && v <= n.numbers.intMax
	}
	if !needsInteger && n.numbers == nil {
		return true
	}
	if expDigits > 4 {
		return false // an exponent that large is the library's to weigh
	}
	r, ok := new(big.Rat).SetString(string(raw))
	if !ok || needsInteger && !r.IsInt() {
		return false
	}
	return n.numbers == nil || n.numbers.takes(r)
}

func (b *plainBounds) takes(r *big.Rat) bool {
	return (b.min == nil || r.Cmp(b.min) >= 0) && (b.max == nil || r.Cmp(b.max) <= 0) &&
		(b.exclMin == nil || r.Cmp(b.exclMin) > 0) && (b.exclMax == nil || r.Cmp(b.exclMax) < 0)
}
