package wire

import (
	"encoding/json"
	"unicode/utf8"
)

// jsonScan reads a JSON document by the grammar of RFC 8259, as encoding/json's
// decoder does: what DecodeInstance and a PlainSchema's check share.
type jsonScan struct {
	b     []byte
	i     int
	depth int
}

// maxScanDepth is encoding/json's bound on nesting, which IsObject applies.
const maxScanDepth = 10000

func (sc *jsonScan) skipSpace() {
	for sc.i < len(sc.b) {
		switch sc.b[sc.i] {
		case ' ', '\t', '\r', '\n':
			sc.i++
		default:
			return
		}
	}
}

// end reports whether nothing but whitespace follows.
func (sc *jsonScan) end() bool {
	sc.skipSpace()
	return sc.i == len(sc.b)
}

// enter reads the bracket that opens an object or an array, and whether the
// nesting is still within bounds; leave is its end.
func (sc *jsonScan) enter() bool {
	sc.i++
	sc.depth++
	return sc.depth <= maxScanDepth
}

func (sc *jsonScan) leave() { sc.depth-- }

// empty reads the bracket that closes an object or an array right after the one
// that opened it, if it is there.
func (sc *jsonScan) empty(closing byte) bool {
	sc.skipSpace()
	if sc.i < len(sc.b) && sc.b[sc.i] == closing {
		sc.i++
		return true
	}
	return false
}

// colon reads the colon between a member's name and its value.
func (sc *jsonScan) colon() bool {
	sc.skipSpace()
	if sc.i >= len(sc.b) || sc.b[sc.i] != ':' {
		return false
	}
	sc.i++
	return true
}

// after reads what follows a member or an element: a comma, more to come, or the
// bracket that closes them.
func (sc *jsonScan) after(closing byte) (more, ok bool) {
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

func (sc *jsonScan) literal(word string) bool {
	if len(sc.b)-sc.i < len(word) || string(sc.b[sc.i:sc.i+len(word)]) != word {
		return false
	}
	sc.i += len(word)
	return true
}

// stringBytes reads the string at sc.i (after whitespace) and returns the bytes
// between its quotes, and whether they are its value as they stand: no escapes,
// and valid UTF-8 (encoding/json replaces invalid bytes).
func (sc *jsonScan) stringBytes() (raw []byte, plain, ok bool) {
	sc.skipSpace()
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

// unquote decodes the string stringBytes last read, as encoding/json does.
func (sc *jsonScan) unquote(raw []byte) (string, bool) {
	var s string
	err := json.Unmarshal(sc.b[sc.i-len(raw)-2:sc.i], &s)
	return s, err == nil
}

// escape reads one escape sequence of a string.
func (sc *jsonScan) escape() bool {
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

// number reads a number, -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, and says
// whether it was written as a whole number (no fraction, no exponent) and how many
// digits its exponent has.
func (sc *jsonScan) number() (raw []byte, whole bool, expDigits int, ok bool) {
	start := sc.i
	if sc.b[sc.i] == '-' {
		sc.i++
	}
	switch {
	case sc.i < len(sc.b) && sc.b[sc.i] == '0':
		sc.i++
	case sc.digits() == 0:
		return nil, false, 0, false
	}
	whole = true
	if sc.i < len(sc.b) && sc.b[sc.i] == '.' {
		sc.i++
		whole = false
		if sc.digits() == 0 {
			return nil, false, 0, false
		}
	}
	if sc.i < len(sc.b) && (sc.b[sc.i] == 'e' || sc.b[sc.i] == 'E') {
		sc.i++
		whole = false
		if sc.i < len(sc.b) && (sc.b[sc.i] == '+' || sc.b[sc.i] == '-') {
			sc.i++
		}
		if expDigits = sc.digits(); expDigits == 0 {
			return nil, false, 0, false
		}
	}
	return sc.b[start:sc.i], whole, expDigits, true
}

func (sc *jsonScan) digits() int {
	start := sc.i
	for sc.i < len(sc.b) && sc.b[sc.i] >= '0' && sc.b[sc.i] <= '9' {
		sc.i++
	}
	return sc.i - start
}
