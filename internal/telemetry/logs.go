package telemetry

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// FlushEvery is the longest a log line waits in a Logger's batch before it is written.
const FlushEvery = 100 * time.Millisecond

// batchMax is how many bytes of lines a Logger holds before it writes them at once.
const batchMax = 64 << 10

// Logger returns the JSON logger a toolgate process writes to w (its stderr), and the
// flush to call before the process exits.
//
// Lines are written in batches: an edge logs a line per request, and a write per line
// is a system call per request on the hot path, and another for whatever reads the
// other end. A line leaves at most FlushEvery after it is logged, as soon as batchMax
// bytes are waiting, and at once, with those before it, when it is a warning or an
// error.
func Logger(w io.Writer) (*slog.Logger, func()) {
	b := &batchWriter{w: w}
	b.timer = time.AfterFunc(time.Hour, b.scheduled)
	b.timer.Stop()
	flush := func() {
		b.timer.Stop()
		_ = b.Flush()
	}
	return slog.New(flushOnWarn{Handler: slog.NewJSONHandler(b, nil), out: b}), flush
}

// batchWriter collects what is written to it and writes it to w in one piece: when
// asked, when a batch is full, or FlushEvery after the first write of a batch.
type batchWriter struct {
	w io.Writer

	mu      sync.Mutex
	buf     []byte
	pending bool // the timer will flush the batch
	timer   *time.Timer
}

func (b *batchWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) >= batchMax {
		return len(p), b.flushLocked()
	}
	if !b.pending {
		b.pending = true
		b.timer.Reset(FlushEvery)
	}
	return len(p), nil
}

// Flush writes what is waiting.
func (b *batchWriter) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

func (b *batchWriter) scheduled() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending = false
	_ = b.flushLocked()
}

func (b *batchWriter) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.w.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

// flushOnWarn writes a warning or an error, and the lines before it, as soon as it is
// logged: those are read when something is going wrong, maybe just before the process
// dies.
type flushOnWarn struct {
	slog.Handler
	out *batchWriter
}

func (h flushOnWarn) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		if ferr := h.out.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

func (h flushOnWarn) WithAttrs(attrs []slog.Attr) slog.Handler {
	return flushOnWarn{Handler: h.Handler.WithAttrs(attrs), out: h.out}
}

func (h flushOnWarn) WithGroup(name string) slog.Handler {
	return flushOnWarn{Handler: h.Handler.WithGroup(name), out: h.out}
}
