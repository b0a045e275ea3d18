package wire_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
)

func TestPayloadHeader(t *testing.T) {
	p := wire.Payload{ID: "P1", Size: 3<<20 + 1, Parts: 4}
	got, ok, err := wire.PayloadOf(nats.Header{wire.HeaderPayload: []string{p.String()}})
	if !ok || err != nil || got != p {
		t.Fatalf("%+v %v %v, want %+v", got, ok, err, p)
	}
	if _, ok, _ := wire.PayloadOf(nats.Header{}); ok {
		t.Error("a message without the header names a payload")
	}
	for _, bad := range []string{"P1", "P1 10", "P1 -1 1", "P1 10 0", "P1 0 1", "P1 2 3", "P.1 10 1", "P1 x 1", "P1 10 1 1"} {
		if _, ok, err := wire.PayloadOf(nats.Header{wire.HeaderPayload: []string{bad}}); !ok || err == nil {
			t.Errorf("%q: ok %v, err %v; want a contract error", bad, ok, err)
		}
	}
	for key, want := range map[string]bool{"P1/0": true, "P1/12": true, "P1/-1": false, "P1/01": false, "P1": false, "a.b/1": false, "../x/1": false} {
		if _, _, err := wire.ParsePayloadKey(key); (err == nil) != want {
			t.Errorf("key %q: err %v", key, err)
		}
	}
	if n := wire.PayloadPartSize(1 << 20); n <= 0 || n > 1<<20-wire.PayloadRoom {
		t.Errorf("part of a 1 MiB message: %d", n)
	}
	if n := wire.PayloadPartSize(4096); n <= 0 || n >= 4096 {
		t.Errorf("part of a 4 KiB message: %d", n)
	}
	if wire.PayloadLimitOf(nats.Header{}) != wire.DefaultPayloadLimit || wire.PayloadLimitOf(nats.Header{wire.HeaderPayloadLimit: []string{"5"}}) != 5 {
		t.Error("HeaderPayloadLimit misread")
	}
}
