package registry

import "bytes"

// IntegerForm rewrites, in the JSON document b, every number that is a whole number
// within the range of an int64 but is written with a fraction or an exponent (1.0,
// 5e2, 1.50e1) in its plain integer form (1, 500, 15); other bytes are kept as they
// are. b must be valid JSON. It returns b itself when nothing needs rewriting.
//
// JSON Schema counts 1.0 as an integer, so such a number passes an "integer" field,
// but a typed decoder (Go's int, Rust's i64, Java's long) refuses it: a tool would fail
// on parameters the gateway accepted. Every number is rewritten, not only those of
// "integer" fields: a field that takes any number must take 1 as well as 1.0, while a
// field the schema calls an integer may only be counted on to take 1.
func IntegerForm(b []byte) []byte {
	var out []byte // nil until something is rewritten
	done := 0      // b[:done] is in out
	for i := 0; i < len(b); {
		switch c := b[i]; {
		case c == '"':
			i = skipString(b, i)
		case c == '-' || (c >= '0' && c <= '9'):
			j := i + 1
			plain := true
			for ; j < len(b) && isNumberByte(b[j]); j++ {
				if b[j] == '.' || b[j] == 'e' || b[j] == 'E' {
					plain = false
				}
			}
			if !plain {
				if n, ok := integral(b[i:j]); ok {
					out = append(append(out, b[done:i]...), n...)
					done = j
				}
			}
			i = j
		default:
			i++
		}
	}
	if out == nil {
		return b
	}
	return append(out, b[done:]...)
}

// skipString returns the index after the string that starts at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// maxInt64 and minInt64 are the bounds of an int64 in decimal, without the sign.
const (
	maxInt64 = "9223372036854775807"
	minInt64 = "9223372036854775808"
)

// integral returns the plain integer form of the JSON number tok, and whether it is a
// whole number within the range of an int64. It works on the digits, never on a float
// (which would call 1.0000000000000000001 whole) nor a big number (a huge exponent
// would make a huge one).
func integral(tok []byte) ([]byte, bool) {
	neg := tok[0] == '-'
	if neg {
		tok = tok[1:]
	}
	mant, expPart := tok, []byte(nil)
	if k := bytes.IndexAny(tok, "eE"); k >= 0 {
		mant, expPart = tok[:k], tok[k+1:]
	}
	whole, frac, _ := bytes.Cut(mant, []byte{'.'})
	if expPart == nil && len(bytes.TrimRight(frac, "0")) > 0 {
		return nil, false // the common fraction: 0.25
	}
	digits := make([]byte, 0, len(whole)+len(frac)+len(maxInt64))
	digits = append(append(digits, whole...), frac...)
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
	}
	if len(digits) == 0 {
		return []byte{'0'}, true // 0.0, -0e5
	}
	// The value is digits × 10^exp.
	exp, expNeg := 0, false
	if len(expPart) > 0 && (expPart[0] == '+' || expPart[0] == '-') {
		expNeg = expPart[0] == '-'
		expPart = expPart[1:]
	}
	for _, c := range expPart {
		exp = exp*10 + int(c-'0')
		if exp > 2*len(maxInt64)+len(frac) {
			return nil, false // far beyond an int64, or far below 1
		}
	}
	if expNeg {
		exp = -exp
	}
	exp -= len(frac)
	if exp < 0 {
		cut := len(digits) + exp
		if cut <= 0 || len(bytes.TrimLeft(digits[cut:], "0")) > 0 {
			return nil, false // a fraction is left
		}
		digits = digits[:cut]
	} else {
		if len(digits)+exp > len(maxInt64) {
			return nil, false
		}
		for range exp {
			digits = append(digits, '0')
		}
	}
	limit := maxInt64
	if neg {
		limit = minInt64
	}
	if len(digits) > len(limit) || (len(digits) == len(limit) && string(digits) > limit) {
		return nil, false
	}
	if neg {
		return append([]byte{'-'}, digits...), true
	}
	return digits, true
}
