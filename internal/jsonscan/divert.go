package jsonscan

import (
	"errors"
	"io"
)

// ErrDivertedTwice is a Divert's failure on a body that, past its diverted member,
// names it, or an object on its path, again: decoded, the last would win.
var ErrDivertedTwice = errors.New("jsonscan: the diverted member is given twice")

// maxKey bounds the keys a Divert compares with its path: a longer one is none of it.
const maxKey = 64

// A Divert reads a JSON object as it arrives, checking it as an ObjectChecker does, and
// parts its bytes in two: the value of the member at Path (keys from the top object
// down, as sent, without escapes), when that value is an object, goes to Value as it
// is read; everything else goes to Rest, with {} in the value's place (at At bytes of
// Rest). So a JSON-RPC request too large to hold is read for its envelope while its
// large member (params.arguments) is passed on. It holds the open containers and a
// key, never a value.
type Divert struct {
	Path  []string
	Value io.Writer
	Rest  io.Writer

	check    ObjectChecker
	onPath   int    // the open objects on Path, the top one counted
	key      []byte // the key being read in the deepest object on Path
	inKey    bool
	keyOff   bool // that key is none of Path's (escaped, or too long)
	hit      bool // the last key read there is the next of Path
	within   int  // while a value is diverted: the depth it ends at; else 0
	diverted bool
	rest     int64 // bytes written to Rest
	at       int64
}

// Diverted says whether a value went to Value, which then holds it whole once the
// body has been read (Close).
func (d *Divert) Diverted() bool { return d.diverted }

// At is where in Rest the diverted value's {} stands.
func (d *Divert) At() int64 { return d.at }

// Write reads p, the next bytes of the body, writing each run of it where it goes. It
// fails with ErrNotObject once the bytes cannot begin a JSON object, with
// ErrDivertedTwice, or with the failure of a writer.
func (d *Divert) Write(p []byte) (int, error) {
	if d.check.err != nil {
		return 0, d.check.err
	}
	start, toValue := 0, d.within > 0
	for i, b := range p {
		value, err := d.step(b)
		if err != nil {
			return i, err
		}
		if value == toValue {
			continue
		}
		if err := d.flush(p[start:i], toValue); err != nil {
			return i, err
		}
		if value { // the value begins: its place in Rest
			if err := d.flush([]byte("{}"), false); err != nil {
				return i, err
			}
			d.at = d.rest - 2
		}
		start, toValue = i, value
	}
	return len(p), d.flush(p[start:], toValue)
}

// Close says whether the body, now ended, was one JSON object.
func (d *Divert) Close() error { return d.check.Close() }

func (d *Divert) flush(b []byte, toValue bool) error {
	if len(b) == 0 {
		return nil
	}
	if toValue {
		_, err := d.Value.Write(b)
		return err
	}
	n, err := d.Rest.Write(b)
	d.rest += int64(n)
	return err
}

// step takes one byte and says whether it is the diverted value's.
func (d *Divert) step(b byte) (bool, error) {
	c := &d.check
	if d.within > 0 {
		if !c.step(b) {
			c.err = ErrNotObject
			return true, ErrNotObject
		}
		if len(c.stack) == d.within {
			d.within = 0 // the value's last byte
		}
		return true, nil
	}
	before, depth := c.state, len(c.stack)
	if !c.step(b) {
		c.err = ErrNotObject
		return false, ErrNotObject
	}
	switch {
	case depth == 0 && len(c.stack) == 1:
		d.onPath = 1 // the top object
	case len(c.stack) < d.onPath:
		d.onPath = len(c.stack)
	case depth != d.onPath || d.onPath > len(d.Path):
	case (before == stKeyOrEnd || before == stKey) && c.state == stString:
		d.key, d.inKey, d.keyOff, d.hit = d.key[:0], true, false, false
	case d.inKey && c.state == stColon:
		d.inKey = false
		d.hit = !d.keyOff && string(d.key) == d.Path[d.onPath-1]
		if d.hit && d.diverted {
			// Decoded, the last would win: not the one diverted.
			return false, ErrDivertedTwice
		}
	case d.inKey:
		d.keyOff = d.keyOff || b == '\\' || len(d.key) == maxKey
		d.key = append(d.key, b)
	case before == stValue && c.state != stValue:
		hit := d.hit
		d.hit = false
		if !hit || b != '{' {
			break
		}
		if d.onPath < len(d.Path) {
			d.onPath++ // an object on Path
			break
		}
		d.diverted, d.within = true, depth
		return true, nil
	}
	return false, nil
}
