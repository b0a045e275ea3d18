package mcpbridge

import (
	"bytes"
	"log/slog"
	"sync"
)

// maxLine bounds one logged line of a child's stderr; a longer one is logged in parts.
const maxLine = 16 << 10

// lineLog writes what a child process prints on stderr to the worker's log, a line at
// a time.
type lineLog struct {
	log *slog.Logger

	mu  sync.Mutex
	buf []byte
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) >= maxLine {
				l.emit(l.buf[:maxLine])
				l.buf = l.buf[maxLine:]
				continue
			}
			return len(p), nil
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
}

// flush logs what is left after the last newline, once the process has exited.
func (l *lineLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(l.buf)
		l.buf = nil
	}
}

func (l *lineLog) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	l.log.Info("upstream stderr", "line", string(line))
}
