package compose

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// verdicts keeps what each failing check of the container tests said, so that
// TestStack prints it again last: the output's end, which is what a CI report shows,
// then names the failures rather than the containers' logs printed after them.
type verdicts struct {
	mu    sync.Mutex
	lines []string
}

var failed verdicts

func (v *verdicts) keep(t *testing.T, msg string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lines = append(v.lines, t.Name()+": "+msg)
}

// errorf is t.Errorf, kept.
func (v *verdicts) errorf(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	v.keep(t, msg)
	t.Error(msg)
}

// fatalf is t.Fatalf, kept.
func (v *verdicts) fatalf(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	v.keep(t, msg)
	t.Fatal(msg)
}

// String is every failure kept, in the order they happened.
func (v *verdicts) String() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return strings.Join(v.lines, "\n")
}
