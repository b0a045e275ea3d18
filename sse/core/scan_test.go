package core

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// scanSeeds are messages of the shapes the scan reads and of those it leaves to
// encoding/json: odd spacing, nesting, escapes, numbers, duplicates, other cases.
var scanSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
	` { "jsonrpc" : "2.0" , "id" : "a-1" , "method" : "tools/list" } `,
	"{\n\t\"jsonrpc\":\"2.0\",\r\n\"method\":\"notifications/initialized\"}",
	`{"jsonrpc":"2.0","id":-0,"method":"ping","params":null}`,
	`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1e3,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"id":"two","method":"ping"}`,
	`{"jsonrpc":"2.0","jsonrpc":"1.0","id":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a]}\"{[","arguments":[{"x":"}"},[],{}]}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"s":"\\\"\\\\"}}}`,
	`{"jsonrpc":"2.0","id":"tg-1","result":{"content":[{"type":"text","text":"hi"}]}}`,
	`{"jsonrpc":"2.0","id":4,"error":{"code":-1,"message":"no"}}`,
	`{"JSONRPC":"2.0","Id":1,"Method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","extra":true}`,
	`{"json\u0072pc":"2.0","id":1,"method":"ping"}`,
	`{"jsonrpc":"2\u002e0","id":"\u0061","method":"p\u0069ng"}`,
	`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":[1],"method":"ping"}`,
	`{"jsonrpc":2,"id":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":7}`,
	`{}`, `[]`, `null`, `"x"`, `{"jsonrpc":"2.0"`, ``,
}

// FuzzScanMessage: a message the scan reads, it reads as encoding/json does, and
// the message made of it is the same, error and all.
func FuzzScanMessage(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var scanned, std wireMessage
		if !scanMessage(data, &scanned) {
			return
		}
		if err := json.Unmarshal(data, &std); err != nil {
			t.Fatalf("scanned %q, which encoding/json refuses: %v", data, err)
		}
		if !reflect.DeepEqual(scanned, std) {
			t.Fatalf("%q: scanned %#v, encoding/json %#v", data, scanned, std)
		}
		got, gotErr := scanned.message()
		want, wantErr := std.message()
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotErr, wantErr) {
			t.Fatalf("%q: message %#v (%v), from encoding/json %#v (%v)", data, got, gotErr, want, wantErr)
		}
	})
}

// TestScanReadsThePlainShapes: the shapes clients send are the scan's, not left to
// encoding/json (else it buys nothing), and the rest is left.
func TestScanReadsThePlainShapes(t *testing.T) {
	for in, want := range map[string]bool{
		scanSeeds[0]: true, scanSeeds[1]: true, scanSeeds[2]: true, scanSeeds[9]: true, scanSeeds[11]: true,
		`{"JSONRPC":"2.0","Id":1,"Method":"ping"}`:                    false,
		`{"jsonrpc":"2.0","id":1,"method":"ping","extra":true}`:       false,
		`{"jsonrpc":"2.0","id":4,"error":{"code":-1,"message":"no"}}`: false,
		`{"jsonrpc":"2\u002e0","id":1,"method":"ping"}`:               false,
		`null`: false, `{"jsonrpc":"2.0"`: false,
	} {
		var w wireMessage
		if got := scanMessage([]byte(in), &w); got != want {
			t.Errorf("%s: scanned %v, want %v", in, got, want)
		}
	}
	var p mcp.CallToolParamsRaw
	if !scanCallParams([]byte(`{"name":"echo","arguments":{"a":1},"_meta":{"progressToken":7}}`), &p) ||
		p.Name != "echo" || string(p.Arguments) != `{"a":1}` || p.Meta["progressToken"] != float64(7) {
		t.Fatalf("tools/call params: scanned %#v", p)
	}
}

// FuzzScanCallParams: tools/call params the scan reads, it reads as encoding/json
// does.
func FuzzScanCallParams(f *testing.F) {
	for _, s := range []string{
		`{"name":"echo","arguments":{"text":"hi"}}`,
		`{"name":"echo","arguments":null,"_meta":null}`,
		` {"_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"x"} `,
		`{"name":"a","name":"b","arguments":[1,{"}":"]"}]}`,
		`{"_meta":{"a":1},"name":"x","_meta":{"b":2}}`, `{"_meta":{"a":1},"_meta":null,"name":"x"}`,
		`{"name":"echo","requestState":"s"}`,
		`{"Name":"echo"}`, `{"name":7}`, `{"_meta":[]}`, `{}`, `null`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var scanned, std mcp.CallToolParamsRaw
		if !scanCallParams(data, &scanned) {
			return
		}
		if err := json.Unmarshal(data, &std); err != nil {
			t.Fatalf("scanned %q, which encoding/json refuses: %v", data, err)
		}
		if !reflect.DeepEqual(scanned, std) {
			t.Fatalf("%q: scanned %#v, encoding/json %#v", data, scanned, std)
		}
	})
}
