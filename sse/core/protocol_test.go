package core

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDecodeMessageAgreesWithTheSDK: the edge's own decoder reads every message as
// the SDK's does, and refuses what it refuses.
func TestDecodeMessageAgreesWithTheSDK(t *testing.T) {
	for _, in := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
		`{"jsonrpc":"2.0","id":"a-1","method":"tools/list"}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":2,"method":""}`,
		`{"jsonrpc":"2.0","id":"tg-1","result":{"content":{"type":"text","text":"hi"}}}`,
		`{"jsonrpc":"2.0","id":4,"error":{"code":-1,"message":"no","data":{"why":"because"}}}`,
		`{"jsonrpc":"2.0","result":{}}`,
		`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
		`{"id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":{},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":7}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools\/call"}`,
		`{"jsonrpc":"2.0","id":1,"method":"t\u00e9st"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tést"}`,
		`{"jsonrpc":"2.0","id":1,"method":"a\"b"}`,
		`{"jsonrpc":"2.0","id":1,"method":null}`,
		`{"jsonrpc":"2.0","id":1,"method":"\ud800"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"`,
		`"just a string"`,
	} {
		t.Run(in, func(t *testing.T) {
			want, wantErr := jsonrpc.DecodeMessage([]byte(in))
			got, err := decodeMessage([]byte(in))
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("error %v, the SDK's %v", err, wantErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %#v, the SDK %#v", got, want)
			}
		})
	}
}

// TestEncodeResultAgreesWithTheSDK: framing a result gives what the SDK's encoder
// gives.
func TestEncodeResultAgreesWithTheSDK(t *testing.T) {
	result := json.RawMessage(`{"content":[{"type":"text","text":"<a & b>"}]}`)
	for _, raw := range []any{float64(7), `a "quoted" id`, nil} {
		id, err := jsonrpc.MakeID(raw)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: result})
		if got := EncodeResult(id, result); string(got) != string(want) {
			t.Fatalf("id %v: got %s, the SDK %s", id.Raw(), got, want)
		}
	}
}

// TestToolResultEncodesAsTheSDKs: a call's result reads as the SDK's CallToolResult
// of the same content.
func TestToolResultEncodesAsTheSDKs(t *testing.T) {
	for _, tc := range []struct {
		text       string
		structured string
		isError    bool
	}{
		{text: `{"text":"<hi> & \"bye\""}`, structured: `{"text":"<hi> & \"bye\""}`},
		{text: "plain, with a newline\n"},
		{text: "the tool failed", isError: true},
		{text: ""},
	} {
		sdk := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tc.text}}, IsError: tc.isError}
		ours := newToolResult(tc.text, tc.isError)
		if tc.structured != "" {
			sdk.StructuredContent = json.RawMessage(tc.structured)
			ours.StructuredContent = json.RawMessage(tc.structured)
		}
		want, err := json.Marshal(sdk)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(ours)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("got %s, the SDK %s", got, want)
		}
	}
}
