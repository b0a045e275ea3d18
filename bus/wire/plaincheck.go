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
	sc := plainScan{b: b}
	if !sc.value(p.root) {
		return false
	}
	sc.skipSpace()
	return sc.i == len(sc.b)
}

// plainScan reads a JSON document by the grammar of RFC 8259, as the instance
// decoders do, checking each value against its schema as it goes.
type plainScan struct {
	b     []byte
	i     int
	depth int
}

// maxScanDepth is encoding/json's bound on nesting, which the decoders apply.
const maxScanDepth = 10000

// anyValue is the schema of a value nothing is asked of.
var anyValue = plainNode{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}

func (sc *plainScan) skipSpace() {
	for sc.i < len(sc.b) {
		switch sc.b[sc.i] {
		case ' ', '\t', '\r', '\n':
			sc.i++
		default:
			return
		}
	}
}

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

func (sc *plainScan) literal(word string) bool {
	if len(sc.b)-sc.i < len(word) || string(sc.b[sc.i:sc.i+len(word)]) != word {
		return false
	}
	sc.i += len(word)
	return true
}

func (sc *plainScan) enter() bool {
	sc.i++ // { or [
	sc.depth++
	return sc.depth <= maxScanDepth
}

func (sc *plainScan) object(n *plainNode) bool {
	if !sc.enter() {
		return false
	}
	var seen uint64
	sc.skipSpace()
	more := true
	if sc.i < len(sc.b) && sc.b[sc.i] == '}' {
		sc.i++
		more = false
	}
	for more {
		sc.skipSpace()
		raw, plain, ok := sc.stringBytes()
		if !ok {
			return false
		}
		var f plainField
		if plain {
			f = n.fields[string(raw)]
		} else {
			var name string
			if json.Unmarshal(sc.b[sc.i-len(raw)-2:sc.i], &name) != nil {
				return false
			}
			f = n.fields[name]
		}
		sc.skipSpace()
		if sc.i >= len(sc.b) || sc.b[sc.i] != ':' {
			return false
		}
		sc.i++
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
	sc.depth--
	return seen&n.required == n.required
}

func (sc *plainScan) array(n *plainNode) bool {
	if !sc.enter() {
		return false
	}
	count := 0
	sc.skipSpace()
	more := true
	if sc.i < len(sc.b) && sc.b[sc.i] == ']' {
		sc.i++
		more = false
	}
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
	sc.depth--
	return (n.minItems < 0 || count >= n.minItems) && (n.maxItems < 0 || count <= n.maxItems)
}

// after reads what follows a member or an element: a comma, more to come, or the
// bracket that closes them.
func (sc *plainScan) after(closing byte) (more, ok bool) {
	sc.skipSpace()
	switch {
	case sc.i >= len(sc.b):
	case sc.b[sc.i] == ',':
		sc.i++
		return true, true
	case sc.b[sc.i] == closing:
		sc.i++
		return false, true
	}
	return false, false
}

// stringBytes reads the string at sc.i and returns the bytes between its quotes,
// and whether they are its value as they stand: no escapes, and valid UTF-8 (the
// decoders replace invalid bytes).
func (sc *plainScan) stringBytes() (raw []byte, plain, ok bool) {
	if sc.i >= len(sc.b) || sc.b[sc.i] != '"' {
		return nil, false, false
	}
	sc.i++
	start := sc.i
	escaped, ascii := false, true
	for sc.i < len(sc.b) {
		switch c := sc.b[sc.i]; {
		case c == '"':
			raw = sc.b[start:sc.i]
			sc.i++
			return raw, !escaped && (ascii || utf8.Valid(raw)), true
		case c == '\\':
			escaped = true
			if !sc.escape() {
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		default:
			ascii = ascii && c < utf8.RuneSelf
			sc.i++
		}
	}
	return nil, false, false
}

// escape reads one escape sequence of a string, as RFC 8259 writes it.
func (sc *plainScan) escape() bool {
	if sc.i+1 >= len(sc.b) {
		return false
	}
	switch sc.b[sc.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		sc.i += 2
		return true
	case 'u':
		if len(sc.b)-sc.i < 6 {
			return false
		}
		for _, h := range sc.b[sc.i+2 : sc.i+6] {
			if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
				return false
			}
		}
		sc.i += 6
		return true
	}
	return false
}

func (sc *plainScan) string(n *plainNode) bool {
	raw, plain, ok := sc.stringBytes()
	if !ok {
		return false
	}
	if n.enum == nil && n.format == nil && n.minLen < 0 && n.maxLen < 0 {
		return true
	}
	var s string
	if plain {
		s = string(raw)
	} else if json.Unmarshal(sc.b[sc.i-len(raw)-2:sc.i], &s) != nil {
		return false
	}
	if n.enum != nil && !n.enum.strings[s] {
		return false
	}
	if n.minLen >= 0 || n.maxLen >= 0 {
		runes := utf8.RuneCountInString(s)
		if n.minLen >= 0 && runes < n.minLen || n.maxLen >= 0 && runes > n.maxLen {
			return false
		}
	}
	return n.formatTakes(s)
}

// number reads a number as RFC 8259 writes it, -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?,
// and checks it against its schema: an integer of up to 18 digits written plainly
// against int64 bounds, any other number by its exact value, as the library does.
func (sc *plainScan) number(n *plainNode) bool {
	start := sc.i
	if sc.b[sc.i] == '-' {
		sc.i++
	}
	switch {
	case sc.i < len(sc.b) && sc.b[sc.i] == '0':
		sc.i++
	case sc.digits() == 0:
		return false
	}
	whole := true
	if sc.i < len(sc.b) && sc.b[sc.i] == '.' {
		sc.i++
		whole = false
		if sc.digits() == 0 {
			return false
		}
	}
	expDigits := 0
	if sc.i < len(sc.b) && (sc.b[sc.i] == 'e' || sc.b[sc.i] == 'E') {
		sc.i++
		whole = false
		if sc.i < len(sc.b) && (sc.b[sc.i] == '+' || sc.b[sc.i] == '-') {
			sc.i++
		}
		if expDigits = sc.digits(); expDigits == 0 {
			return false
		}
	}
	raw := sc.b[start:sc.i]
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

func (sc *plainScan) digits() int {
	start := sc.i
	for sc.i < len(sc.b) && sc.b[sc.i] >= '0' && sc.b[sc.i] <= '9' {
		sc.i++
	}
	return sc.i - start
}
