package main

import (
	"fmt"
	"slices"

	"github.com/toolgate/toolgate/bench/load"
)

// Both parts of the bench measure their rows in rounds: every row once per round, the
// rows in another order each round, so that the machine's other work falls on all of
// them alike. A row is compared with its part's baseline (the bare handler, the direct
// stdio call) round by round, against the baseline's figure from the same round, and
// the report gives the median of those ratios with their lowest and highest.

// inRound is the order round takes rows in: rows rotated by round places, so that
// none is always first, just after the warm-up or the previous part's load.
func inRound[T any](rows []T, round int) []T {
	if len(rows) == 0 {
		return nil
	}
	k := round % len(rows)
	return append(slices.Clone(rows[k:]), rows[:k]...)
}

// ratios is, per round, what f gives for a row's result over what it gives for the
// baseline's result of the same round; a round whose baseline gives 0 is left out.
func ratios(row, base []load.Result, f func(load.Result) float64) []float64 {
	var out []float64
	for r := range min(len(row), len(base)) {
		if d := f(base[r]); d > 0 {
			out = append(out, f(row[r])/d)
		}
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread is xs as the report gives ratios: "median (lowest–highest)", the one figure
// alone when there is one, and "–" when there is none.
func spread(xs []float64) string {
	if len(xs) == 0 {
		return "–"
	}
	if len(xs) == 1 {
		return fmt.Sprintf("%.2f", xs[0])
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", median(xs), slices.Min(xs), slices.Max(xs))
}
