package snapshot

import (
	"syscall"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// BenchmarkPrewrite measures what a write does before its first commit on
// BENCH_PREWRITE_DISTRICTS (default 5,000) generated districts read from a
// file, as `snapwriter write --input FILE` does: model.Open (decode, check,
// size and hash every district), model.Prepare (Validate, and the data's
// summaries), every district's summary and the payload's hash
// (Writer.buildInput). Besides ns/op (wall) it reports
// cpu-ns/op, the process's user+system CPU, and cores, their ratio: how
// much of the machine the phase keeps busy. "memory" runs the same on the
// snapshot held in memory (model.Generate; Prepare does the hashing).
func BenchmarkPrewrite(b *testing.B) {
	ns, err := envInts("BENCH_PREWRITE_DISTRICTS", "5000")
	if err != nil || len(ns) != 1 {
		b.Fatalf("BENCH_PREWRITE_DISTRICTS: want one number of districts (%v)", err)
	}
	n := ns[0]
	snap := model.Generate(day, n, 1)
	path, size := inputFile(b, snap)
	const fence = "000000000000001"
	prepare := func(b *testing.B, s *model.Snapshot) {
		data, err := model.Prepare(s, day)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := layout.SummarizeDistricts(s, data, fence); err != nil {
			b.Fatal(err)
		}
		if _, err := layout.PayloadHash(s); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("file", func(b *testing.B) {
		b.SetBytes(int64(size))
		measureCPU(b, func() {
			s, err := model.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			prepare(b, s)
			s.Close()
		})
	})
	b.Run("memory", func(b *testing.B) {
		measureCPU(b, func() { prepare(b, snap) })
	})
}

// measureCPU runs op b.N times and reports, beside ns/op, the process's
// CPU time per op (cpu-ns/op) and its ratio to the wall time (cores).
func measureCPU(b *testing.B, op func()) {
	b.ReportAllocs()
	cpu0 := processCPU(b)
	t0 := time.Now()
	for b.Loop() {
		op()
	}
	wall := time.Since(t0)
	cpu := processCPU(b) - cpu0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cores")
}

// processCPU is the user+system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
