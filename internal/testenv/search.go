package testenv

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// SearchStreams reads every message of every stream nc's account holds (each KV
// bucket, object store, the audit trail, the MCP event log) and fails the test for
// each one whose data or headers hold value. It returns how many messages of each
// stream it read, so a test can tell that what it meant to search was there.
func SearchStreams(t testing.TB, nc *nats.Conn, value string) map[string]uint64 {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := Context(t)
	read := map[string]uint64{}
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				continue // deleted, or expired since
			}
			read[name]++
			if bytes.Contains(m.Data, []byte(value)) {
				t.Errorf("message %d of stream %s holds the value in plaintext", seq, name)
			}
			for k, vs := range m.Header {
				if strings.Contains(strings.Join(vs, "\n"), value) {
					t.Errorf("header %s of message %d of stream %s holds the value in plaintext", k, seq, name)
				}
			}
		}
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return read
}
