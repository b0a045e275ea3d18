// Package helper starts what the sample's tests need, and fails the test when it cannot.
package helper

import "testing"

// Start fails the test through a second helper.
func Start(t testing.TB) { must(t, false) }

func must(t testing.TB, ok bool) {
	t.Helper()
	if !ok {
		t.Fatalf("not ok")
	}
}

// Wait only reports.
func Wait(t testing.TB) { t.Error("waited") }
