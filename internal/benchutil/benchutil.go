// Package benchutil holds what the benchmarks share: medians over rounds
// and round counts from the environment. Only tests import it.
package benchutil

import (
	"os"
	"slices"
	"strconv"
)

// Median is the median of xs (0 for none).
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	switch {
	case len(s) == 0:
		return 0
	case len(s)%2 == 1:
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// EnvInt reads a positive integer from the environment, else def.
func EnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
