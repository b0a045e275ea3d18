package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/jsonscan"
)

// isObject is registry.IsObject, which the checker must agree with.
func isObject(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && utf8.Valid(b) && json.Valid(b)
}

// check runs an ObjectChecker over b, written in pieces of step bytes.
func check(b []byte, step int) bool {
	var c jsonscan.ObjectChecker
	for len(b) > 0 {
		n := min(step, len(b))
		if _, err := c.Write(b[:n]); err != nil {
			return false
		}
		b = b[n:]
	}
	return c.Close() == nil
}

func FuzzObjectChecker(f *testing.F) {
	for _, s := range []string{`{}`, ` {"a":1} `, `{"a":[1,2,{"b":null}],"c":"\u00e9\n"}`, `[1]`, `{"a":-0.5e+3}`, `{"a":01}`,
		`{"a":"é"}`, "{\"a\":\"\xff\"}", `{"a":tru}`, `{"a":1,}`, `{"a" 1}`, `{}{}`, `{"a":1.}`, `{"\ud800":"x"}`, `"x"`, ``, `{"a":[}`} {
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, b []byte, step uint8) {
		want := isObject(b)
		if got := check(b, int(step%8)+1); got != want {
			t.Fatalf("%q in steps of %d: checker %v, IsObject %v", b, step%8+1, got, want)
		}
	})
}
