package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzMembers: the members Members finds in a JSON object are the ones
// encoding/json finds, value for value, the last of a repeated key winning.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":"x","c":null,"d":true,"e":[1,{"f":"]}"}],"g":{"h":"\"{["}}`,
		` { "a" : -1.5e3 , "a" : "\u0041\\" } `, `{}`, `{"":""}`, `{"k\"ey":[[],[{}]]}`,
		`[]`, `"s"`, `1`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want map[string]json.RawMessage
		if !json.Valid(data) || json.Unmarshal(data, &want) != nil || want == nil {
			return // Members takes valid JSON only; these tests look at objects
		}
		got := map[string]json.RawMessage{}
		if !Members(data, func(key, value []byte) bool {
			var k string
			if err := json.Unmarshal(key, &k); err != nil {
				t.Fatalf("%q: key %q is no JSON string: %v", data, key, err)
			}
			got[k] = value
			return true
		}) {
			t.Fatalf("%q: Members refused an object", data)
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d members, encoding/json %d", data, len(got), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("%q: member %q is %q, encoding/json %q", data, k, got[k], v)
			}
		}
	})
}

func TestPlainString(t *testing.T) {
	for in, want := range map[string]bool{`"tools/call"`: true, `""`: true, `"a\"b"`: false, `"tést"`: false, `7`: false, `"x`: false} {
		if _, ok := PlainString([]byte(in)); ok != want {
			t.Errorf("PlainString(%s) ok %v, want %v", in, ok, want)
		}
	}
}
