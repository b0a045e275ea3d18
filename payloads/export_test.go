package payloads

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolgate/toolgate/bus/wire"
)

// WithLayout is s on obj with parts stored in chunks of chunk bytes and read through
// copyBuf bytes, for benchmarks that compare layouts.
func WithLayout(s *Store, obj jetstream.ObjectStore, chunk, copyBuf int) *Store {
	return &Store{obj: obj, part: s.part, chunk: chunk, copyBuf: copyBuf}
}

// PartSize is the size of s's parts.
func PartSize(s *Store) int { return s.part }

// WriteBuffered is Write as it was before it streamed each part into the object
// store: every part read whole into a buffer of its size, then put from there. The
// benchmarks measure Write against it.
func WriteBuffered(ctx context.Context, s *Store, tool string, r io.Reader, limit int64) (wire.Payload, error) {
	p := wire.Payload{ID: nuid.Next()}
	sum := sha256.New()
	src := io.TeeReader(r, sum)
	buf := make([]byte, s.part)
	for {
		n, err := io.ReadFull(src, buf)
		if n > 0 {
			if p.Size += int64(n); p.Size > limit {
				s.Delete(context.WithoutCancel(ctx), tool, p)
				return wire.Payload{}, ErrTooLarge
			}
			if perr := putPart(ctx, s.obj, wire.PayloadPartName(tool, p.ID, p.Parts), bytes.NewReader(buf[:n]), s.chunk); perr != nil {
				s.Delete(context.WithoutCancel(ctx), tool, p)
				return wire.Payload{}, perr
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
