package payloads

import (
	"bytes"
	"cmp"
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
	// chunk is the object store's chunk size (0: its default, 128 KiB) and copyBuf
	// the buffer a part is read through (0: 32 KiB); benchmarks compare others.
	chunk   int
	copyBuf int
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
// with the sha256 of its bytes. Each part is read into the object store's chunks as
// it arrives: Write holds one chunk at a time, never a part.
func (s *Store) Write(ctx context.Context, tool string, head []byte, r io.Reader, limit int64) (wire.Payload, error) {
	p := wire.Payload{ID: nuid.Next()}
	if r == nil {
		r = bytes.NewReader(nil)
	}
	sum := sha256.New()
	src := &source{r: io.TeeReader(io.MultiReader(bytes.NewReader(head), r), sum), limit: limit}
	fail := func(err error) (wire.Payload, error) {
		s.Delete(context.WithoutCancel(ctx), tool, p)
		return wire.Payload{}, err
	}
	for {
		// A part begins only with a byte to put in it: a payload ends without an
		// empty part, and a body that fails before its first is no object.
		var first [1]byte
		n, err := io.ReadFull(src, first[:])
		switch {
		case src.err != nil || errors.Is(err, ErrTooLarge):
			return fail(src.failure(err))
		case n == 0:
			p.Size, p.SHA256 = src.size, hex.EncodeToString(sum.Sum(nil))
			return p, nil
		}
		part := fill{io.MultiReader(bytes.NewReader(first[:]), io.LimitReader(src, int64(s.part-1)))}
		if err := putPart(ctx, s.obj, wire.PayloadPartName(tool, p.ID, p.Parts), part, s.chunk); err != nil {
			if src.err != nil || errors.Is(err, ErrTooLarge) {
				return fail(src.failure(err))
			}
			return fail(fmt.Errorf("payloads: store part %d: %w", p.Parts, err))
		}
		p.Parts++
	}
}

// source is what Write stores: counted against its limit, with its own read failure
// kept apart from the object store's.
type source struct {
	r           io.Reader
	size, limit int64
	err         error // r's failure, not io.EOF
}

func (s *source) Read(b []byte) (int, error) {
	n, err := s.r.Read(b)
	if s.size += int64(n); s.size > s.limit {
		return 0, ErrTooLarge
	}
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

// failure is the error Write returns for err, which source's Read ended.
func (s *source) failure(err error) error {
	if s.err != nil {
		return &ReadError{Err: s.err}
	}
	return err
}

// fill reads as io.ReadFull does, so that each of the object store's chunks is full
// but the last however the client's bytes arrive: a body that trickles is stored in
// as few messages as one that does not.
type fill struct{ r io.Reader }

func (f fill) Read(b []byte) (int, error) {
	n, err := io.ReadFull(f.r, b)
	if err == io.ErrUnexpectedEOF {
		err = nil
	}
	return n, err
}

// WriteTo writes tool's payload p to w, one part at a time, and fails when a part is
// missing or the parts do not add up to p's size.
func (s *Store) WriteTo(ctx context.Context, w io.Writer, tool string, p wire.Payload) error {
	var written int64
	buf := make([]byte, cmp.Or(s.copyBuf, 32<<10))
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

// putPart stores what r holds, to its end, as the object name in chunks of chunk
// bytes (0: the object store's default).
func putPart(ctx context.Context, obj jetstream.ObjectStore, name string, r io.Reader, chunk int) error {
	meta := jetstream.ObjectMeta{Name: name}
	if chunk > 0 {
		meta.Opts = &jetstream.ObjectMetaOptions{ChunkSize: uint32(chunk)}
	}
	_, err := obj.Put(ctx, meta, r)
	return err
}
