package main

import (
	"slices"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bench/load"
)

func TestInRoundTakesEveryRowOnceAndRotates(t *testing.T) {
	rows := []string{"a", "b", "c"}
	for round, want := range [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"a", "b", "c"}, {"b", "c", "a"}} {
		if got := inRound(rows, round); !slices.Equal(got, want) {
			t.Errorf("round %d: %v, want %v", round, got, want)
		}
	}
	if !slices.Equal(rows, []string{"a", "b", "c"}) {
		t.Errorf("the rows were reordered in place: %v", rows)
	}
	if got := inRound([]string(nil), 2); len(got) != 0 {
		t.Errorf("no rows: got %v", got)
	}
}

// result is a run of ok successful requests in one second.
func result(ok int) load.Result { return load.Result{Requests: ok, Elapsed: time.Second} }

func TestRatiosPairTheRoundsOfRowAndBaseline(t *testing.T) {
	rps := func(r load.Result) float64 { return r.RPS() }
	row := []load.Result{result(50), result(30), result(80)}
	base := []load.Result{result(100), result(0), result(200), result(400)}
	// Round 1's baseline has nothing to divide by; round 3 has no row to compare.
	if got, want := ratios(row, base, rps), []float64{0.5, 0.4}; !slices.Equal(got, want) {
		t.Fatalf("ratios %v, want %v", got, want)
	}
}

func TestMedianAndSpread(t *testing.T) {
	for _, c := range []struct {
		xs     []float64
		median float64
		spread string
	}{
		{nil, 0, "–"},
		{[]float64{0.42}, 0.42, "0.42"},
		{[]float64{0.5, 0.38, 0.45}, 0.45, "0.45 (0.38–0.50)"},
		{[]float64{0.4, 0.3, 0.2, 0.1}, 0.25, "0.25 (0.10–0.40)"},
	} {
		if got := median(c.xs); got != c.median {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.median)
		}
		if got := spread(c.xs); got != c.spread {
			t.Errorf("spread(%v) = %q, want %q", c.xs, got, c.spread)
		}
	}
}

func TestCountNamesOneRoundInTheSingular(t *testing.T) {
	if got := count(1, "round"); got != "1 round" {
		t.Errorf("count(1) = %q", got)
	}
	if got := count(3, "round"); got != "3 rounds" {
		t.Errorf("count(3) = %q", got)
	}
}
