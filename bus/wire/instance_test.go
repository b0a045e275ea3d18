package wire

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var instanceCases = []string{
	`{}`, `[]`, `{"a":1}`, ` {"a" : [1, 2.5, -3e2, 0, -0.0e+1, 1E-7] , "b":{"c":null,"d":true,"e":false}} `,
	`{"to":"ada@example.com","subject":"Hello","body":"Nice to meet you."}`,
	`{"s":"caf\u00e9 \"quoted\" \\ \/ \b\f\n\r\t \ud83d\ude00"}`, `{"u":"été 😀"}`,
	`{"a":1,"a":2}`, `{"n":12345678901234567890123}`, `"x"`, `1`, `null`, `[[[[]]]]`,
	`{"bad":"\xff\xfe"}`,
	// Not JSON: both must refuse it.
	``, ` `, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`,
	`{"a":1e}`, `{"a":tru}`, `{"a":nul}`, `{"a":"\q"}`, `{"a":"x` + "\n" + `"}`, `{"a":"x"}}`, `{} {}`,
	`{"a":"\u12"}`, `{'a':1}`, `{"a":+1}`, `{"a":Infinity}`, `[1 2]`, `{"a" 1}`,
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
}

// TestDecodeInstance: the call path's decoder gives what the schema library's own
// would, and refuses what it refuses; and a plain schema that asks nothing reads
// the same documents as JSON.
func TestDecodeInstance(t *testing.T) {
	for _, doc := range instanceCases {
		checkInstance(t, []byte(doc))
	}
}

func FuzzDecodeInstance(f *testing.F) {
	for _, doc := range instanceCases {
		f.Add([]byte(doc))
	}
	f.Fuzz(checkInstance)
}

func checkInstance(t *testing.T, doc []byte) {
	want, wantErr := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	got, err := DecodeInstance(doc)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%.80q: error %v, the library's %v", doc, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%.80q: %#v, the library's %#v", doc, got, want)
	}
	if anything := (&PlainSchema{}); anything.Accepts(doc) != (wantErr == nil) {
		t.Fatalf("%.80q: the plain check's grammar disagrees with the library's decoder (%v)", doc, wantErr)
	}
}
