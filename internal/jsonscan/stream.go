package jsonscan

import (
	"errors"
	"unicode/utf8"
)

// ErrNotObject is what an ObjectChecker finds in bytes that are not one JSON object
// in UTF-8.
var ErrNotObject = errors.New("jsonscan: not one JSON object in UTF-8")

// maxDepth bounds the nesting an ObjectChecker follows, as encoding/json's does.
const maxDepth = 10000

// An ObjectChecker reads a body as it arrives (Write) and says at its end (Close)
// whether it was one JSON object in UTF-8, as registry.IsObject says of a whole body:
// for a body too large to hold. It keeps the containers open and a few bytes, never a
// string or a number.
type ObjectChecker struct {
	stack   []byte // the open containers, '{' or '['
	state   state
	key     bool   // the string being read is an object's key
	lit     string // the rest of a literal being read (true, false, null)
	hex     int    // hex digits still due in a \u escape
	rune    [utf8.UTFMax]byte
	runeLen int // bytes of an incomplete UTF-8 sequence held in rune
	err     error
}

type state uint8

const (
	stStart state = iota
	stValue
	stKeyOrEnd // after '{'
	stKey      // after ','
	stColon
	stAfterValue
	stValueOrEnd // after '['
	stString
	stEscape
	stLiteral
	stMinus
	stZero
	stInt
	stDot
	stFrac
	stE
	stESign
	stExp
	stEnd
)

// Write checks p, the next bytes of the body. It fails, and goes on failing, once the
// bytes cannot begin a JSON object.
func (c *ObjectChecker) Write(p []byte) (int, error) {
	for _, b := range p {
		if c.err != nil {
			return 0, c.err
		}
		if !c.step(b) {
			c.err = ErrNotObject
		}
	}
	return len(p), c.err
}

// Close says whether the body, now ended, was one JSON object.
func (c *ObjectChecker) Close() error {
	if c.err == nil && !c.endNumber() {
		c.err = ErrNotObject
	}
	if c.err == nil && c.state != stEnd {
		c.err = ErrNotObject
	}
	return c.err
}

func space(b byte) bool { return b == ' ' || b == '\t' || b == '\r' || b == '\n' }

// step takes one byte; false when it cannot come next.
func (c *ObjectChecker) step(b byte) bool {
	switch c.state {
	case stStart:
		if space(b) {
			return true
		}
		return b == '{' && c.open(b)
	case stValue, stValueOrEnd:
		if space(b) {
			return true
		}
		if b == ']' && c.state == stValueOrEnd {
			return c.close(b)
		}
		return c.value(b)
	case stKeyOrEnd, stKey:
		if space(b) {
			return true
		}
		if b == '}' && c.state == stKeyOrEnd {
			return c.close(b)
		}
		c.state, c.key = stString, true
		return b == '"'
	case stColon:
		if space(b) {
			return true
		}
		c.state = stValue
		return b == ':'
	case stAfterValue:
		return c.afterValue(b)
	case stString, stEscape:
		return c.inString(b)
	case stLiteral:
		if b != c.lit[0] {
			return false
		}
		if c.lit = c.lit[1:]; c.lit == "" {
			c.state = stAfterValue
		}
		return true
	case stEnd:
		return space(b)
	}
	return c.number(b)
}

// value begins a value with b.
func (c *ObjectChecker) value(b byte) bool {
	switch {
	case b == '{' || b == '[':
		return c.open(b)
	case b == '"':
		c.state, c.key = stString, false
	case b == 't':
		c.state, c.lit = stLiteral, "rue"
	case b == 'f':
		c.state, c.lit = stLiteral, "alse"
	case b == 'n':
		c.state, c.lit = stLiteral, "ull"
	case b == '-':
		c.state = stMinus
	case b == '0':
		c.state = stZero
	case '1' <= b && b <= '9':
		c.state = stInt
	default:
		return false
	}
	return true
}

func (c *ObjectChecker) open(b byte) bool {
	if len(c.stack) >= maxDepth {
		return false
	}
	c.stack = append(c.stack, b)
	c.state = stKeyOrEnd
	if b == '[' {
		c.state = stValueOrEnd
	}
	return true
}

func (c *ObjectChecker) close(b byte) bool {
	if len(c.stack) == 0 || (b == '}') != (c.stack[len(c.stack)-1] == '{') {
		return false
	}
	c.stack = c.stack[:len(c.stack)-1]
	c.state = stAfterValue
	if len(c.stack) == 0 {
		c.state = stEnd
	}
	return true
}

// afterValue takes what may follow a value: a comma or its container's end.
func (c *ObjectChecker) afterValue(b byte) bool {
	switch {
	case space(b):
		return true
	case b == ',' && len(c.stack) > 0:
		c.state = stValue
		if c.stack[len(c.stack)-1] == '{' {
			c.state = stKey
		}
		return true
	case b == '}' || b == ']':
		return c.close(b)
	}
	return false
}

// inString takes a byte of a string: its end, an escape, or a character in UTF-8.
func (c *ObjectChecker) inString(b byte) bool {
	switch {
	case c.state == stEscape && c.hex > 0:
		c.hex--
		if c.hex == 0 {
			c.state = stString
		}
		return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
	case c.state == stEscape:
		c.state = stString
		switch b {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			return true
		case 'u':
			c.state, c.hex = stEscape, 4
			return true
		}
		return false
	case c.runeLen > 0 || b >= utf8.RuneSelf:
		return c.utf8(b)
	case b == '"':
		c.state = stAfterValue
		if c.key {
			c.state = stColon
		}
		return true
	case b == '\\':
		c.state = stEscape
		return true
	}
	return b >= 0x20
}

// utf8 takes a byte of a multi-byte character, checking it once it is whole.
func (c *ObjectChecker) utf8(b byte) bool {
	if c.runeLen == len(c.rune) {
		return false
	}
	c.rune[c.runeLen] = b
	c.runeLen++
	if !utf8.FullRune(c.rune[:c.runeLen]) {
		return true
	}
	r, n := utf8.DecodeRune(c.rune[:c.runeLen])
	c.runeLen = 0
	return r != utf8.RuneError || n > 1
}

// number takes a byte of a number, or ends it and takes the byte after it.
func (c *ObjectChecker) number(b byte) bool {
	digit := '0' <= b && b <= '9'
	switch c.state {
	case stMinus:
		c.state = stInt
		if b == '0' {
			c.state = stZero
		}
		return digit
	case stInt:
		if digit {
			return true
		}
		fallthrough
	case stZero:
		switch b {
		case '.':
			c.state = stDot
			return true
		case 'e', 'E':
			c.state = stE
			return true
		}
	case stDot:
		c.state = stFrac
		return digit
	case stFrac:
		if digit {
			return true
		}
		if b == 'e' || b == 'E' {
			c.state = stE
			return true
		}
	case stE:
		if b == '+' || b == '-' {
			c.state = stESign
			return true
		}
		c.state = stExp
		return digit
	case stESign:
		c.state = stExp
		return digit
	case stExp:
		if digit {
			return true
		}
	}
	// The number ended before b, if it could end here.
	if !c.endNumber() {
		return false
	}
	return c.step(b)
}

// endNumber ends a number being read where it may end; true when none is.
func (c *ObjectChecker) endNumber() bool {
	switch c.state {
	case stZero, stInt, stFrac, stExp:
		c.state = stAfterValue
		return true
	case stMinus, stDot, stE, stESign:
		return false
	}
	return true
}
