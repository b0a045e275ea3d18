package registry_test

import (
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/registry"
)

func TestIntegerForm(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"a whole number with a fraction", `{"n":1.0}`, `{"n":1}`},
		{"a whole number with an exponent", `{"n":5e2}`, `{"n":500}`},
		{"a fraction and an exponent that make a whole number", `{"n":1.50E+1,"m":100e-2}`, `{"n":15,"m":1}`},
		{"negative zero", `{"n":-0.0}`, `{"n":0}`},
		{"negative whole numbers", `{"n":-3.000,"m":-9223372036854775808.0}`, `{"n":-3,"m":-9223372036854775808}`},
		{"the largest int64", `{"n":9223372036854775807.0}`, `{"n":9223372036854775807}`},
		{"numbers in arrays and nested objects", `{"a":[1.0,2e0,{"b":3.0}]}`, `{"a":[1,2,{"b":3}]}`},
		{"plain integers are kept", `{"n":1,"m":-0}`, `{"n":1,"m":-0}`},
		{"fractions are kept", `{"n":1.5,"m":1e-2,"k":0.1e1}`, `{"n":1.5,"m":1e-2,"k":1}`},
		{"a number barely not whole is kept", `{"n":1.0000000000000000000001}`, `{"n":1.0000000000000000000001}`},
		{"numbers beyond an int64 are kept", `{"n":9223372036854775808.0,"m":1e19,"k":-9223372036854775809.0}`, `{"n":9223372036854775808.0,"m":1e19,"k":-9223372036854775809.0}`},
		{"a huge exponent is kept", `{"n":1e999999999}`, `{"n":1e999999999}`},
		{"a tiny exponent is kept", `{"n":1e-999999999}`, `{"n":1e-999999999}`},
		{"zero with any exponent is zero", `{"n":0e999999999}`, `{"n":0}`},
		{"strings are kept", `{"s":"1.0","t":"a \"5e2\" b\\","u":5.0}`, `{"s":"1.0","t":"a \"5e2\" b\\","u":5}`},
		{"keys are kept", `{"1.0":2.0}`, `{"1.0":2}`},
		{"whitespace is kept", "{ \"n\" : 1.0 ,\n\"m\":[ 2.0 ] }", "{ \"n\" : 1 ,\n\"m\":[ 2 ] }"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !json.Valid([]byte(tc.in)) {
				t.Fatalf("the test's input is not JSON: %s", tc.in)
			}
			if got := string(registry.IntegerForm([]byte(tc.in))); got != tc.want {
				t.Fatalf("IntegerForm(%s) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestIntegerFormKeepsTheBytesWhenNothingChanges(t *testing.T) {
	in := []byte(`{"e":"eE.","n":[1,2,-3],"x":1.5}`)
	if got := registry.IntegerForm(in); &got[0] != &in[0] {
		t.Fatal("IntegerForm copied a document it did not change")
	}
}

// BenchmarkIntegerForm is its cost on every call: a typical body with nothing to
// rewrite.
func BenchmarkIntegerForm(b *testing.B) {
	body := []byte(`{"to":"ada@example.com","subject":"Hello","body":"From toolgate, with 2 numbers: 1.5 and 3e2.","count":3,"ratio":0.25}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		registry.IntegerForm(body)
	}
}
