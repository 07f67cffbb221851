package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"

	"github.com/snapwriter/snapwriter/internal/progress"
	"github.com/snapwriter/snapwriter/pacing"
	"github.com/snapwriter/snapwriter/snapshot"
)

// registerProgress adds write's and repair's --progress (backfill has its
// own, a bar of dates).
func registerProgress(fl *pflag.FlagSet, mode *string) {
	fl.StringVar(mode, "progress", progress.ModeAuto, "progress display: auto (a bar of the districts on a terminal), bar, or log")
}

// checkProgress refuses a --progress that is not auto, bar or log: write's
// and repair's, and backfill's (a bar of dates, the same modes).
func checkProgress(mode string) error {
	if progress.CheckMode(mode) != nil {
		return usagef("--progress %q: want auto, bar or log", mode)
	}
	return nil
}

// districtBar starts the bar, named desc, of a write or repair of n
// districts when mode asks for one (progress.New): it returns the
// writer options that feed it — and quiet the writer's logger to
// warnings, since per-chunk lines would tear the bar apart — and the func
// that ends it, leaving it where the write stopped. Without a bar both
// are no-ops.
//
// The bar's name also shows the write budget's rate limit, once a second:
// "write 2026-11-20 ≤500/s", and how often the store pushed back.
func (a *app) districtBar(mode, desc string, n int, budget *pacing.Budget) ([]snapshot.Option, func()) {
	bar := progress.New(a.stderr, mode, n, describeRate(desc, budget.Stats()), progress.Rate("districts"))
	if bar == nil {
		// No WithProgress(bar): a nil *Bar would be a Progress all the same.
		return nil, func() {}
	}
	// Drawn at once, at 0 while the lock is taken and the root written:
	// the clock of its rate and time left starts with the write, not with
	// the first chunk.
	bar.Start()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				bar.Describe(describeRate(desc, budget.Stats()))
			}
		}
	}()
	opts := []snapshot.Option{snapshot.WithProgress(bar), snapshot.WithLogger(bar.Quiet(a.log))}
	return opts, func() {
		close(stop)
		<-done
		_ = bar.Stop()
	}
}

// describeRate is a bar's name desc with the write budget's limit, and
// the store's push-back when there was any.
func describeRate(desc string, st pacing.Stats) string {
	s := fmt.Sprintf("%s ≤%.0f/s", desc, st.Limit)
	if st.PushBacks > 0 {
		s += fmt.Sprintf(" (store pushed back %d×)", st.PushBacks)
	}
	return s
}

// syncStderr is stderr made safe for the logger and a bar's goroutine to
// write at once: an *os.File is (and stays one, so that a bar can tell a
// terminal); anything else, such as a test's buffer, gets a lock.
func syncStderr(w io.Writer) io.Writer {
	if _, ok := w.(*os.File); ok {
		return w
	}
	return zapcore.Lock(zapcore.AddSync(w))
}
