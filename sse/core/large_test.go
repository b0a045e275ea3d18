package core

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// stringSeeds are texts of every kind a tool may answer with: escapes, characters of
// every UTF-8 length, invalid bytes, a character cut short at the end, and the
// characters JSON or HTML escape.
var stringSeeds = []string{
	"",
	"plain",
	`{"blob":"a\"b\\c"}` + "\n\t\r\b\f\x00\x1f",
	"<a href='x'>&amp;</a>",
	"é ü € 𝄞 日本語 \u2028\u2029",
	"\xff\xfe invalid \xc3 cut \xe2\x82 cut \xf0\x9d\x84",
	"ends cut \xf0\x9d",
	"\xe2",
}

// FuzzJSONString: jsonString, written in pieces of any size (a character split between
// two), makes a JSON string whose value is what encoding/json makes of the whole
// text, so a large result's text content reads as a small one's.
func FuzzJSONString(f *testing.F) {
	for _, s := range stringSeeds {
		f.Add(s, uint8(1))
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, text string, piece uint8) {
		var out bytes.Buffer
		j := &jsonString{w: &out}
		r := bytes.NewReader([]byte(text))
		buf := make([]byte, int(piece)%7+1)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				if _, werr := j.Write(buf[:n]); werr != nil {
					t.Fatal(werr)
				}
			}
			if err != nil {
				break
			}
		}
		out.Write(j.close())
		var got, want string
		if err := json.Unmarshal([]byte(`"`+out.String()+`"`), &got); err != nil {
			t.Fatalf("%q made %q, not a JSON string: %v", text, out.String(), err)
		}
		b, _ := json.Marshal(text)
		_ = json.Unmarshal(b, &want)
		if got != want {
			t.Fatalf("%q: got %q, want %q", text, got, want)
		}
	})
}

// TestDataLines: an event written in pieces (EventFrom) has a data line per line of
// its data, as Event makes it.
func TestDataLines(t *testing.T) {
	for _, data := range []string{`{"a":1}`, "{\n  \"a\": 1\r\n}\n", strings.Repeat("x", 70<<10) + "\n" + strings.Repeat("y", 10)} {
		var whole, pieces bytes.Buffer
		ew := &EventWriter{send: func(b []byte) error { whole.Write(b); return nil }}
		_ = ew.Event("7", "message", []byte(data))
		ew = &EventWriter{send: func(b []byte) error { pieces.Write(b); return nil }}
		err := ew.EventFrom("7", "message", func(w io.Writer) error {
			_, err := io.Copy(w, iotest.OneByteReader(strings.NewReader(data)))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if whole.String() != pieces.String() {
			t.Fatalf("%.40q: EventFrom wrote %.80q, Event %.80q", data, pieces.String(), whole.String())
		}
	}
}
