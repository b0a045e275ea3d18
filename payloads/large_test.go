package payloads_test

import (
	"os"
	"testing"
)

// large skips a test that moves megabytes through a client or a tool in this test's
// process where that would take long for nothing it checks:
//   - in a short run (`go test -short`);
//   - under the race detector, unless TOOLGATE_LARGE_UNDER_RACE=1. What these tests
//     check (bytes intact, the edge's peak RSS, objects left in the bucket) is done by
//     the stack's processes, which run the binary built without it; under it, only the
//     test's own clients and tools slow down, about seven times (a 50 MiB result
//     through one transport: 47 s against 6.7 s). `make test` runs this package a
//     second time without -race, so every test here runs there.
func large(t *testing.T, what string) {
	t.Helper()
	if why := notLarge(); why != "" {
		t.Skip(what + ": " + why)
	}
}

// notLarge says why this run moves no large payloads through the test's own
// clients, or "" where it does.
func notLarge() string {
	switch {
	case testing.Short():
		return "not in a short run"
	case raceDetector && os.Getenv("TOOLGATE_LARGE_UNDER_RACE") == "":
		return "run without -race (make test's second pass), or set TOOLGATE_LARGE_UNDER_RACE=1"
	}
	return ""
}
