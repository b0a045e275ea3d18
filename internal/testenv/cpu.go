package testenv

import (
	"syscall"
	"testing"
	"time"
)

// CPUTime is the CPU this process has used so far, user and system: a benchmark whose
// edge, NATS server and workers all run in the test process reports the difference
// per call, which a loaded machine's waits do not inflate as they do wall time.
func CPUTime(tb testing.TB) time.Duration {
	tb.Helper()
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
