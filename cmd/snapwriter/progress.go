package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
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

// barMode is a --progress mode with auto decided: a bar when a person
// reads stderr (stderrTerminal), else none.
func (a *app) barMode(mode string) string {
	if mode != progress.ModeAuto {
		return mode
	}
	if a.stderrTerminal {
		return progress.ModeBar
	}
	return progress.ModeLog
}

// districtBar starts the bar, named desc, of a write or repair of n
// districts when mode asks for one (barMode, progress.New): it returns
// the writer options that feed it — and leave the per-chunk log lines
// out of the writer's logger, since the bar counts the chunks (see
// quietChunks) — and the func that ends it, leaving it where the write
// stopped. Without a bar both are no-ops. The other log lines go above
// the bar (stderr is a progress.Screen).
//
// The bar's name also shows the write budget's rate limit, once a second:
// "write 2026-11-20 ≤500/s", and how often the store pushed back.
func (a *app) districtBar(mode, desc string, n int, budget *pacing.Budget) ([]snapshot.Option, func()) {
	bar := progress.New(a.stderr, a.barMode(mode), n, describeRate(desc, budget.Stats()), progress.Rate("districts"))
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
	opts := []snapshot.Option{snapshot.WithProgress(bar), snapshot.WithLogger(quietChunks(a.log))}
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

// chunkCommitted is the message of the writer's line for each chunk
// committed (and the root's, batch 0): what a bar counts.
// TestWriteProgressAutoIsLog fails if the writer logs it no more.
const chunkCommitted = "batch committed"

// quietChunks is log without the info lines of committed chunks, which a
// bar shows as its count: 400 of them for 20,000 districts would push
// everything else off the screen. The other lines, and every warning
// (a chunk that failed), stay.
func quietChunks(log *zap.Logger) *zap.Logger {
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return dropChunks{c} }))
}

// dropChunks is a core that leaves out the chunkCommitted lines below
// warning.
type dropChunks struct{ zapcore.Core }

func (d dropChunks) With(fields []zapcore.Field) zapcore.Core { return dropChunks{d.Core.With(fields)} }

func (d dropChunks) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Level < zapcore.WarnLevel && e.Message == chunkCommitted {
		return ce
	}
	return d.Core.Check(e, ce)
}
