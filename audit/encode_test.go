package audit

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// FuzzRecordEncode holds a record's encoding to encoding/json's, byte for byte: the
// stream's readers, and every record written before, read what encoding/json wrote.
func FuzzRecordEncode(f *testing.F) {
	f.Add("rec-1", "acme", "key-1", "email", "send_email", "rest", "ok", "edge-1", "", "req_1", "", int64(1_700_000_000_123_456_789), 200, uint64(0), false, false)
	f.Add("rec-2", "acme", "", "email", "send_email", "mcp-streamable", "ok", "edge-1", "ana", "req_2", "https://client.example/<meta>.json", int64(1_700_000_000_123_456_789), 0, uint64(0), true, false)
	f.Add("", "", "", "", "", "", "", "", "", "", "", int64(0), 0, uint64(0), false, false)
	f.Add("<&>", "\"quoted\"\\", "\x00\x1f\b\f\n\r\t", "é\u2028\u2029", "\xff\xfe", "a\u007fb", "\U0001F600", "x\xc3", "w", "r", "0af7651916cd43dd8448eb211c80319c", int64(-9_000_000_000_000_000_000), -3, uint64(42), true, true)
	f.Fuzz(func(t *testing.T, id, account, key, tool, method, transport, outcome, edge, worker, requestID, traceID string, unixNano int64, status int, seq uint64, link, cut bool) {
		r := Record{ID: id, Time: time.Unix(0, unixNano).UTC(), Kind: KindCall, Account: account, Key: key, Link: link, Tool: tool,
			Method: method, Transport: transport, ArgsSHA256: traceID, ArgumentsCut: cut, ResultCut: !cut, RequestBytes: status * 7,
			ResponseBytes: -status, Outcome: outcome, Status: status, LatencyUS: unixNano / 3, Edge: edge, Worker: worker,
			RequestID: requestID, TraceID: traceID, Seq: seq}
		if link { // a signed-in call: the user and the client the token names
			r.User, r.Client, r.By = worker, traceID, "user:"+worker
		}
		if cut {
			r.Secret = []string{"/arguments/" + key, "/result" + tool}
		}
		if link {
			r.Time = r.Time.In(time.FixedZone("somewhere", status*3600))
		}
		same(t, r)
	})
}

// TestRecordEncodeLeavesData: a record that keeps a call's data, or a time
// encoding/json refuses, is encoded by encoding/json, which compacts the data.
func TestRecordEncodeLeavesData(t *testing.T) {
	same(t, Record{Kind: KindCall, Time: time.Now(), Arguments: json.RawMessage(`{ "a" : "<b>" }`), Result: json.RawMessage(`[1, 2]`)})
	same(t, Record{Kind: KindAdmin, Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
	same(t, Record{Kind: KindAdmin, Time: time.Now().In(time.FixedZone("far", 25*3600))})
}

func same(t *testing.T, r Record) {
	t.Helper()
	want, werr := json.Marshal(&r)
	got, gerr := r.encode()
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("encode: error %v, encoding/json's %v", gerr, werr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encode:\n got %s\nwant %s", got, want)
	}
}

// BenchmarkRecordEncode: a call's record as a busy edge writes it, by encode and by
// encoding/json, in the same run.
func BenchmarkRecordEncode(b *testing.B) {
	r := Record{ID: "1NHOkKPZFBBZiU4bxHXgOF", Time: time.Now().UTC(), Kind: KindCall, Account: "acme", Key: "key-1", Tool: "email",
		Method: "send_email", Transport: TransportREST, ArgsSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		RequestBytes: 60, ResponseBytes: 60, Outcome: OutcomeOK, Status: 200, LatencyUS: 900, Edge: "edge-7f3a", RequestID: "req_5f1c2d3e4a5b6c7d8e9f0a1b"}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = r.encode()
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(&r)
		}
	})
}
