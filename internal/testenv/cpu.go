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

// ReportCPU reports the process's CPU per operation since cpu0 (CPUTime) as
// cpu-µs/op.
func ReportCPU(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64((CPUTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}
