package asks

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
)

// payload stores or reads one part of one of the tool's payloads (wire.AskPayload).
// The part's object is named under the subject's tool, whatever the worker sent: a
// worker reaches its own tool's payloads and no other's.
func (s *Server) payload(ctx context.Context, a wire.Ask, m *nats.Msg) ([]byte, error) {
	id, n, err := wire.ParsePayloadKey(m.Header.Get(wire.HeaderKey))
	if err != nil {
		return nil, badRequest("%v", err)
	}
	obj, err := s.payloads(ctx)
	if err != nil {
		return nil, err
	}
	name := wire.PayloadPartName(a.Tool, id, n)
	switch a.Payload {
	case wire.PayloadPut:
		if len(m.Data) == 0 {
			return nil, badRequest("a payload's part is never empty")
		}
		_, err = obj.PutBytes(ctx, name, m.Data)
		return nil, err
	default:
		body, err := s.readPart(ctx, obj, name)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, &wire.AskError{Code: wire.AskNotFound, Message: "no such part: the call it belonged to is over, or it expired"}
		}
		return body, err
	}
}

// payloads opens the payloads bucket, once per edge; the edge made it at start.
func (s *Server) payloads(ctx context.Context) (jetstream.ObjectStore, error) {
	s.mu.Lock()
	obj := s.objects
	s.mu.Unlock()
	if obj != nil {
		return obj, nil
	}
	obj, err := s.js.ObjectStore(ctx, wire.PayloadBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, &wire.AskError{Code: wire.AskNoBucket, Message: fmt.Sprintf("no %s bucket: an edge makes it as it starts", wire.PayloadBucket)}
	}
	if err != nil {
		return nil, &wire.AskError{Code: wire.AskFailed, Message: fmt.Sprintf("the edge could not open %s (%v); try again", wire.PayloadBucket, err)}
	}
	s.mu.Lock()
	s.objects = obj
	s.mu.Unlock()
	return obj, nil
}

// readPart reads the object name whole, to its end, where the object store checks its
// digest, into a buffer sized from the object's info. GetBytes grows one from 512
// bytes as it reads, allocating and copying about a part's size more on the way
// (BenchmarkPayloadGet10MiB).
func (s *Server) readPart(ctx context.Context, obj jetstream.ObjectStore, name string) ([]byte, error) {
	if s.getBytes {
		return obj.GetBytes(ctx, name)
	}
	r, err := obj.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	info, err := r.Info()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	// MinRead more, so that ReadFrom finds the room it asks for at the end and does
	// not grow the buffer only to read io.EOF. A part answered is at most a message.
	b.Grow(int(min(info.Size, uint64(s.nc.MaxPayload()))) + bytes.MinRead)
	if _, err := b.ReadFrom(r); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
