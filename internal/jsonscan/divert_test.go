package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// exactMember is the value of obj's last member named key exactly (as the edge's own
// scan reads a message; encoding/json would also take other cases), nil for none.
func exactMember(obj []byte, key string) []byte {
	var v []byte
	if len(obj) > 0 {
		Members(obj, func(k, value []byte) bool {
			if string(k) == `"`+key+`"` {
				v = value
			}
			return true
		})
	}
	return v
}

// FuzzDivert: a Divert of a body, fed in pieces, finds it one JSON object exactly when
// ObjectChecker does; its diverted value is the params.arguments that Members finds
// (when that is an object, and the keys are written without escapes), and the rest with the value put back at At is the body.
func FuzzDivert(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"blob":"x"}}}`,
		`{"params":{"arguments":{"a":[1,{"b":"}"}],"c":-1.5e3},"_meta":{"arguments":{}}},"id":"s"}`,
		` { "params" : { "arguments" : { } } } `, `{"params":{"arguments":[1]}}`, `{"params":{"arguments":"s"}}`,
		`{"arguments":{"a":1},"params":{"x":{"arguments":{"b":2}}}}`, `{"p\u0061rams":{"arguments":{"a":1}}}`,
		`{"params":{"arguments":{"a":1},"arguments":{"b":2}}}`, `{"params":{"arguments":{"a":1}`, `[1]`, `{"a":tru}`,
		`{"params":{"arguments":{"a":"\xff"}}}`, `{"params":1,"id":2}`,
		`{"params":{"arguments":{"a":1}},"params":{"x":1}}`, `{"params":{"x":1},"params":{"arguments":{"a":1}}}`,
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		var value, rest bytes.Buffer
		d := Divert{Path: []string{"params", "arguments"}, Value: &value, Rest: &rest}
		var err error
		for i := 0; i < len(data) && err == nil; i += int(step) + 1 {
			_, err = d.Write(data[i:min(len(data), i+int(step)+1)])
		}
		if err == nil {
			err = d.Close()
		}
		var check ObjectChecker
		_, _ = check.Write(data)
		want := check.Close()
		if errors.Is(err, ErrDivertedTwice) {
			return // refused as soon as the second begins, object or not
		}
		if (err == nil) != (want == nil) {
			t.Fatalf("%q: Divert %v, ObjectChecker %v", data, err, want)
		}
		if err != nil {
			return
		}
		whole := rest.Bytes()
		if d.Diverted() {
			at := d.At()
			if string(whole[at:at+2]) != "{}" {
				t.Fatalf("%q: no {} at %d of %q", data, at, whole)
			}
			whole = append(append(append([]byte(nil), whole[:at]...), value.Bytes()...), whole[at+2:]...)
		}
		if !bytes.Equal(whole, data) {
			t.Fatalf("%q: put back together as %q", data, whole)
		}
		if !json.Valid(data) {
			return
		}
		args := exactMember(exactMember(data, "params"), "arguments")
		if isObject := len(args) > 0 && args[0] == '{'; isObject && !bytes.Contains(data, []byte(`\`)) {
			if !d.Diverted() || !bytes.Equal(value.Bytes(), args) {
				t.Fatalf("%q: diverted %v %q, the arguments are %q", data, d.Diverted(), value.Bytes(), args)
			}
		} else if !isObject && d.Diverted() {
			t.Fatalf("%q: diverted %q, but its arguments are %q", data, value.Bytes(), args)
		}
	})
}
