package testlint

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNoTestStopsOffItsGoroutine reads every test in the repository, both modules,
// and fails naming each call that may stop a test from a goroutine it started.
func TestNoTestStopsOffItsGoroutine(t *testing.T) {
	root := filepath.Join("..", "..")
	found, err := Goroutines(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Error(f)
	}
	// A check that read nothing would pass: it must see the helpers of both modules
	// that stop their test.
	r, err := load(root)
	if err != nil {
		t.Fatal(err)
	}
	r.markStops(r.sorted())
	for _, k := range []funcKey{
		{filepath.Join(root, "internal", "testenv"), "", "ServerWith"},
		{filepath.Join(root, "deploy", "compose"), "stack", "command"},
	} {
		if fn := r.funcs[k]; fn == nil || fn.fails == "" {
			t.Errorf("the check does not see %s.%s in %s stop its test", k.recv, k.name, k.dir)
		}
	}
}

// TestGoroutinesFindsTheSample checks the check on testdata/sample, whose lines
// marked "// want" are the ones it must name, and no others: calls that stop the test
// directly, through helpers in the same package and another, through a closure and a
// method of a type holding the test, in go statements, WaitGroup.Go and
// time.AfterFunc; and not t.Error, subtests or cleanups.
func TestGoroutinesFindsTheSample(t *testing.T) {
	root := filepath.Join("testdata", "sample")
	found, err := Goroutines(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range found {
		got = append(got, f.Pos)
		t.Log(f)
	}
	want := wanted(t, filepath.Join(root, "cases", "cases_test.go"), "cases/cases_test.go")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("found %v\nwant  %v", got, want)
	}
}

// wanted are the file:line of the lines of path marked "// want".
func wanted(t *testing.T, path, name string) []string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want []string
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if strings.HasSuffix(sc.Text(), "// want") {
			want = append(want, fmt.Sprintf("%s:%d", name, line))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return want
}
