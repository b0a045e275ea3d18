package payloads_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/payloads"
)

// brokenReader gives its bytes and then fails, as a client's body that breaks off.
type brokenReader struct{ r io.Reader }

var errBroke = errors.New("the client went away")

func (b *brokenReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, errBroke
	}
	return n, err
}

// TestStoreWriteStreamsParts: Write stores a payload part by part as it reads it, in
// whole parts but the last (none empty), with the sha256 of all its bytes; a payload
// past its limit, by one byte, and one whose reader fails midway leave no object.
func TestStoreWriteStreamsParts(t *testing.T) {
	nc := testenv.Conn(t, testenv.Server(t).ClientURL())
	ctx := testenv.Context(t)
	store, err := payloads.Open(ctx, nc, 1)
	if err != nil {
		t.Fatal(err)
	}
	part := payloads.PartSize(store)
	data := make([]byte, 2*part+1)
	for i := range data {
		data[i] = byte(i * 7)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// objects counts the bucket's objects and the chunks kept in its stream: a part
	// cut short by a failure has chunks but no object.
	objects := func() (objects int, chunks uint64) {
		list, err := store.Bucket().List(ctx)
		if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
			t.Fatal(err)
		}
		stream, err := js.Stream(ctx, "OBJ_"+wire.PayloadBucket)
		if err != nil {
			t.Fatal(err)
		}
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter("$O."+wire.PayloadBucket+".C.>"))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range info.State.Subjects {
			chunks += n
		}
		return len(list), chunks
	}
	for _, c := range []struct {
		name       string
		head, body []byte
		parts      int
		trickle    bool
	}{
		{"one byte", nil, data[:1], 1, false},
		{"a part exactly", data[:10], data[10:part], 1, false},
		{"two parts exactly", nil, data[:2*part], 2, true},
		{"two parts and a byte", data[:part+3], data[part+3:], 3, true},
	} {
		var r io.Reader = bytes.NewReader(c.body)
		if c.trickle {
			r = iotest.HalfReader(r) // short reads, as a body arrives
		}
		whole := append(bytes.Clone(c.head), c.body...)
		p, err := store.Write(ctx, "parts", c.head, r, int64(len(whole)))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		sum := sha256.Sum256(whole)
		if p.Size != int64(len(whole)) || p.Parts != c.parts || p.SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("%s: %+v, want %d bytes in %d parts", c.name, p, len(whole), c.parts)
		}
		var got bytes.Buffer
		if err := store.WriteTo(ctx, &got, "parts", p); err != nil || !bytes.Equal(got.Bytes(), whole) {
			t.Fatalf("%s: read back %d bytes: %v", c.name, got.Len(), err)
		}
		store.Delete(ctx, "parts", p)
	}
	if n, chunks := objects(); n != 0 || chunks != 0 {
		t.Fatalf("%d objects and %d chunks left after the deletes", n, chunks)
	}

	if _, err := store.Write(ctx, "parts", nil, bytes.NewReader(data), int64(len(data)-1)); !errors.Is(err, payloads.ErrTooLarge) {
		t.Fatalf("one byte past the limit: %v", err)
	}
	_, err = store.Write(ctx, "parts", data[:5], &brokenReader{bytes.NewReader(data[5 : part+part/2])}, int64(len(data)))
	var re *payloads.ReadError
	if !errors.As(err, &re) || !errors.Is(err, errBroke) {
		t.Fatalf("a body that broke off: %v", err)
	}
	if n, chunks := objects(); n != 0 || chunks != 0 {
		t.Fatalf("%d objects and %d chunks left by the failures", n, chunks)
	}
}
