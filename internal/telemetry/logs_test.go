package telemetry

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// lines is a writer that keeps each write as it came, for a test to read.
type lines struct {
	mu     sync.Mutex
	writes []string
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, string(p))
	return len(p), nil
}

func (l *lines) all() (writes int, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.writes), strings.Join(l.writes, "")
}

func TestLoggerWritesInBatches(t *testing.T) {
	t.Run("info lines wait and leave together within FlushEvery", func(t *testing.T) {
		out := &lines{}
		log, _ := Logger(out)
		for i := range 10 {
			log.Info("http request", "n", i)
		}
		if n, _ := out.all(); n != 0 {
			t.Fatalf("%d writes at once, want the lines held", n)
		}
		testenv.Eventually(t, FlushEvery+50*time.Millisecond, "the held lines written", func() bool {
			n, _ := out.all()
			return n > 0
		})
		n, text := out.all()
		if n != 1 || strings.Count(text, "\n") != 10 {
			t.Fatalf("%d writes holding %d lines, want 1 holding 10", n, strings.Count(text, "\n"))
		}
		for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
			if !json.Valid([]byte(line)) {
				t.Fatalf("not a JSON line: %s", line)
			}
		}
	})
	t.Run("a warning leaves at once with the lines before it, in order", func(t *testing.T) {
		out := &lines{}
		log, _ := Logger(out)
		log.Info("first")
		log.With("component", "edge").Warn("second")
		n, text := out.all()
		if n != 1 || strings.Index(text, `"first"`) > strings.Index(text, `"second"`) || !strings.Contains(text, `"component":"edge"`) {
			t.Fatalf("%d writes: %s", n, text)
		}
	})
	t.Run("flush writes what waits", func(t *testing.T) {
		out := &lines{}
		log, flush := Logger(out)
		log.Info("last words")
		flush()
		if _, text := out.all(); !strings.Contains(text, "last words") {
			t.Fatal("the line was not written")
		}
	})
	t.Run("a full batch is written without waiting", func(t *testing.T) {
		out := &lines{}
		log, _ := Logger(out)
		big := strings.Repeat("x", 1024)
		for range batchMax/1024 + 1 {
			log.Info(big)
		}
		if n, _ := out.all(); n == 0 {
			t.Fatal("a full batch waits")
		}
	})
	t.Run("lines logged at once from many goroutines all arrive whole", func(t *testing.T) {
		out := &lines{}
		log, flush := Logger(out)
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 200 {
					log.Info("http request", "g", g, "i", i)
				}
			})
		}
		wg.Wait()
		flush()
		_, text := out.all()
		got := strings.Split(strings.TrimSpace(text), "\n")
		if len(got) != 1600 {
			t.Fatalf("%d lines, want 1600", len(got))
		}
		for _, line := range got {
			if !json.Valid([]byte(line)) {
				t.Fatalf("a torn line: %s", line)
			}
		}
	})
}
