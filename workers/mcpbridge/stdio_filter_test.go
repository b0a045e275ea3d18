package mcpbridge

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestRawFilter: the responses to the bridge's own requests that their requests take
// early never reach the SDK's connection; everything else passes on as it came, in
// order: other messages that name such a request, responses not taken, the SDK's own
// responses, and a line longer than the filter's buffer, which it does not look at.
func TestRawFilter(t *testing.T) {
	line := func(s string) string { return s + "\n" }
	note := line(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`)
	taken := line(`{"jsonrpc":"2.0","id":"tg-raw-1","result":{"content":[]}}`)
	failed := line(`{"jsonrpc":"2.0","id":"tg-raw-9","error":{"code":-32602,"message":"bad arguments"}}`)
	naming := line(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"tg-raw-1"}}`)
	notTaken := line(`{"jsonrpc":"2.0","id":"tg-raw-2","result":{"content":[]}}`)
	sdk := line(`{"jsonrpc":"2.0","id":3,"result":{}}`)
	long := line(`{"jsonrpc":"2.0","id":"tg-raw-1","result":{"text":"` + strings.Repeat("a", rawFilterBuffer) + `"}}`)

	var took []*jsonrpc.Response
	f := &rawFilter{
		r: bufio.NewReaderSize(strings.NewReader(note+taken+naming+failed+notTaken+sdk+long), rawFilterBuffer),
		divert: func(r *jsonrpc.Response) bool {
			if id := r.ID.Raw().(string); id == "tg-raw-1" || id == "tg-raw-9" {
				took = append(took, r)
				return true
			}
			return false
		},
	}
	out, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := note + naming + notTaken + sdk + long; string(out) != want {
		t.Fatalf("the filter passed on\n%.300s\nwant\n%.300s", out, want)
	}
	if len(took) != 2 || string(took[0].Result) != `{"content":[]}` || took[0].Error != nil {
		t.Fatalf("the filter took %+v, want the response to tg-raw-1 first", took)
	}
	var wire *jsonrpc.Error
	if !errors.As(took[1].Error, &wire) || wire.Code != -32602 || wire.Message != "bad arguments" {
		t.Fatalf("the filter took %+v second, want the error of tg-raw-9", took[1])
	}
}
