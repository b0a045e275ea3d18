package payloads

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolgate/toolgate/bus/wire"
)

// TTL is how long a payload is kept at most: as long as the longest call may take
// (the bus's reply window, 30 minutes), after which nothing can use it.
const TTL = 30 * time.Minute

// ErrTooLarge is a payload past the limit its writer was given.
var ErrTooLarge = errors.New("payloads: the payload is past its limit")

// ReadError is Write's failure to read what it was to store (a client's body that
// broke off, or passed its limit).
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return "payloads: reading the payload: " + e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// Store is the payloads bucket on one edge's connection.
type Store struct {
	obj  jetstream.ObjectStore
	part int
}

// Open makes the payloads bucket, or opens it as it is, with replicas on a cluster.
func Open(ctx context.Context, nc *nats.Conn, replicas int) (*Store, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("payloads: %w", err)
	}
	obj, err := js.ObjectStore(ctx, wire.PayloadBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obj, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket:      wire.PayloadBucket,
			Description: "toolgate: requests and replies past a message's size, while their call needs them",
			TTL:         TTL,
			Replicas:    max(replicas, 1),
		})
		if errors.Is(err, jetstream.ErrBucketExists) { // another edge made it first
			obj, err = js.ObjectStore(ctx, wire.PayloadBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("payloads: open %s: %w", wire.PayloadBucket, err)
	}
	return &Store{obj: obj, part: wire.PayloadPartSize(nc.MaxPayload())}, nil
}

// Bucket is the object store itself, for the asks of workers (package asks).
func (s *Store) Bucket() jetstream.ObjectStore { return s.obj }

// Write stores head and then what r holds, to its end, as a payload of tool, with
// at most limit bytes in all (ErrTooLarge past it, and nothing kept), and returns it
// with the sha256 of its bytes. It holds one part at a time.
func (s *Store) Write(ctx context.Context, tool string, head []byte, r io.Reader, limit int64) (wire.Payload, error) {
	p := wire.Payload{ID: nuid.Next()}
	if r == nil {
		r = bytes.NewReader(nil)
	}
	sum := sha256.New()
	src := io.TeeReader(io.MultiReader(bytes.NewReader(head), r), sum)
	buf := make([]byte, s.part)
	for {
		n, err := io.ReadFull(src, buf)
		if n > 0 {
			if p.Size += int64(n); p.Size > limit {
				s.Delete(context.WithoutCancel(ctx), tool, p)
				return wire.Payload{}, ErrTooLarge
			}
			if _, perr := s.obj.PutBytes(ctx, wire.PayloadPartName(tool, p.ID, p.Parts), buf[:n]); perr != nil {
				s.Delete(context.WithoutCancel(ctx), tool, p)
				return wire.Payload{}, fmt.Errorf("payloads: store part %d: %w", p.Parts, perr)
			}
			p.Parts++
		}
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			p.SHA256 = hex.EncodeToString(sum.Sum(nil))
			return p, nil
		case err != nil:
			s.Delete(context.WithoutCancel(ctx), tool, p)
			return wire.Payload{}, &ReadError{Err: err}
		}
	}
}

// WriteTo writes tool's payload p to w, one part at a time, and fails when a part is
// missing or the parts do not add up to p's size.
func (s *Store) WriteTo(ctx context.Context, w io.Writer, tool string, p wire.Payload) error {
	var written int64
	buf := make([]byte, 32<<10)
	for n := range p.Parts {
		// Read as it arrives, in the object store's chunks: no part is held whole.
		part, err := s.obj.Get(ctx, wire.PayloadPartName(tool, p.ID, n))
		if err != nil {
			return fmt.Errorf("payloads: part %d of %d: %w", n, p.Parts, err)
		}
		m, err := io.CopyBuffer(w, io.LimitReader(part, p.Size-written+1), buf)
		part.Close()
		if err != nil {
			return fmt.Errorf("payloads: part %d of %d: %w", n, p.Parts, err)
		}
		if written += m; written > p.Size {
			return fmt.Errorf("payloads: the parts hold more than the %d bytes named", p.Size)
		}
	}
	if written != p.Size {
		return fmt.Errorf("payloads: the parts hold %d bytes, not the %d named", written, p.Size)
	}
	return nil
}

// Read is tool's payload p whole, for a path that cannot stream it (an MCP answer).
func (s *Store) Read(ctx context.Context, tool string, p wire.Payload) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(int(p.Size))
	if err := s.WriteTo(ctx, &b, tool, p); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Delete removes tool's payload p, once its call has used it. A part that is gone
// already is no error: the TTL removes what a failure here leaves.
func (s *Store) Delete(ctx context.Context, tool string, p wire.Payload) {
	for n := range p.Parts {
		_ = s.obj.Delete(ctx, wire.PayloadPartName(tool, p.ID, n))
	}
}
