// Package schedule runs a long-lived worker that writes the day's snapshot
// on a cron schedule: at each tick it reads the input of the tick's date and
// writes it, one write at a time, logging every run. A tick that comes while
// a write is still running is logged as a missed run and skipped, never
// queued: a queue would write stale days late.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/input"
	"github.com/snapwriter/snapwriter/internal/safego"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// parser takes standard 5-field expressions, an optional leading seconds
// field, and descriptors such as @daily or @every 1h.
func parser() cron.Parser {
	return cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
}

// Parse parses a cron expression as a Worker reads it: the five standard
// fields, an optional leading seconds field ("*/10 * * * * *"), or a
// descriptor ("@daily", "@every 1h"). Use it to check a Spec up front.
func Parse(spec string) (cron.Schedule, error) { return parser().Parse(spec) }

// WriteFunc writes snap as the snapshot of date. Its error says why the
// snapshot is not complete; the worker logs it and carries on.
type WriteFunc func(ctx context.Context, date string, snap *model.Snapshot) (*snapshot.Result, error)

// Worker writes one snapshot per tick of a cron schedule.
type Worker struct {
	// Spec is the cron expression (see Parse).
	Spec string
	// Location is the time zone of Spec and of the snapshot date; nil is
	// UTC.
	Location *time.Location
	// DateOffset is added, in days, to the tick's date to get the
	// snapshot's date: -1 writes yesterday's.
	DateOffset int
	// Input reads the input of a date; required.
	Input input.Source
	// Write writes a date's snapshot; required.
	Write WriteFunc
	// Log receives a line per run and per missed run; nil logs nothing.
	Log *zap.Logger
	// ExitCode, when set, turns a run's error into the exit code a one-off
	// write would end with, logged as exitCode, so that scheduled and
	// one-off runs read alike.
	ExitCode func(error) int
	// AllowEmpty: a tick whose date has no input at all (model.ErrMissing)
	// is logged as nothing to write, not as a failed run. Without it such
	// a tick is a failed run like any other: a schedule that finds nothing
	// to write is not working.
	AllowEmpty bool
}

// Run runs the schedule until ctx is done, then starts no new run, waits
// for the write in progress (which sees ctx done and stops) and returns
// nil. It returns an error at once when Spec does not parse or Input or
// Write is missing.
func (w *Worker) Run(ctx context.Context) error {
	if w.Input == nil || w.Write == nil {
		return errors.New("schedule: Worker needs Input and Write")
	}
	loc := w.Location
	if loc == nil {
		loc = time.UTC
	}
	log := w.Log
	if log == nil {
		log = zap.NewNop()
	}
	log = log.With(zap.String("cron", w.Spec), zap.String("timezone", loc.String()))
	cl := cronLogger{log: log, loc: loc}
	c := cron.New(cron.WithLocation(loc), cron.WithParser(parser()), cron.WithLogger(cl),
		cron.WithChain(cron.SkipIfStillRunning(cl)))
	id, err := c.AddJob(w.Spec, cron.FuncJob(func() { w.run(ctx, log, time.Now().In(loc)) }))
	if err != nil {
		return err
	}
	c.Start()
	log.Info("schedule started", zap.Time("next", c.Entry(id).Schedule.Next(time.Now().In(loc))))
	<-ctx.Done()
	log.Info("stopping schedule: no new runs; waiting for the write in progress", zap.String("cause", context.Cause(ctx).Error()))
	<-c.Stop().Done()
	log.Info("schedule stopped")
	return nil
}

// run writes the snapshot of one tick and logs how it went.
func (w *Worker) run(ctx context.Context, log *zap.Logger, tick time.Time) {
	date := tick.AddDate(0, 0, w.DateOffset).Format(time.DateOnly)
	log = log.With(zap.String("date", date), zap.Time("tick", tick))
	if ctx.Err() != nil {
		return
	}
	log.Info("run starting")
	// A panic in a run is a failed run: the worker carries on, as after any
	// other, and the line keeps the stack. Unrecovered, it would end the
	// process from cron's goroutine with the runtime's exit 2, the CLI's
	// code for a usage error. The run's own deferred releases (its lock)
	// ran while the panic unwound.
	var panicked error
	defer func() {
		var pe *safego.PanicError
		if !errors.As(panicked, &pe) {
			return
		}
		var fields []zap.Field
		if w.ExitCode != nil {
			fields = append(fields, zap.Int("exitCode", w.ExitCode(pe)))
		}
		log.Error("run failed: panic", append(fields, zap.String("panic", fmt.Sprint(pe.Value)), zap.ByteString("stack", pe.Stack))...)
	}()
	defer safego.Recover(&panicked) // recover must be the deferred call itself
	t0 := time.Now()
	snap, err := w.Input(ctx, date)
	if err != nil {
		if w.AllowEmpty && errors.Is(err, model.ErrMissing) && !errors.Is(err, model.ErrNotReady) {
			log.Info("run skipped: no input for the date; nothing to write (allow-empty)", zap.Error(err))
			return
		}
		var fields []zap.Field
		if w.ExitCode != nil {
			fields = append(fields, zap.Int("exitCode", w.ExitCode(err)))
		}
		log.Error("run failed: no usable input", append(fields, zap.Error(err))...)
		return
	}
	defer snap.Close()
	res, err := w.Write(ctx, date, snap)
	var fields []zap.Field
	if w.ExitCode != nil {
		fields = append(fields, zap.Int("exitCode", w.ExitCode(err)))
	}
	fields = append(fields, zap.Int64("durationMs", time.Since(t0).Milliseconds()))
	if res != nil {
		fields = append(fields, zap.Bool("complete", res.Complete()), zap.String("fence", res.Fence),
			zap.Int("districtsWritten", res.DistrictsWritten), zap.Int("failedDistricts", len(res.FailedDistricts)))
	}
	switch {
	case errors.Is(err, snapshot.ErrHeld):
		// The write logged the held snapshot's one ERROR line, the one
		// to alert on; this says the run is over.
		log.Warn("run held by the publication gate: nothing written", append(fields, zap.Error(err))...)
	case err != nil:
		log.Error("run failed", append(fields, zap.Error(err))...)
	default:
		log.Info("run finished", fields...)
	}
}

// cronLogger sends robfig/cron's own messages to zap: its routine ones at
// debug level, its errors (a panicking job) at error level, and the skip
// of cron.SkipIfStillRunning as the operator's "missed run" warning.
type cronLogger struct {
	log *zap.Logger
	loc *time.Location
}

// skipMsg is what cron.SkipIfStillRunning logs when it skips a tick.
const skipMsg = "skip"

// Info logs cron's routine messages at debug level, a skipped tick as a
// warning with the time it was due.
func (l cronLogger) Info(msg string, kv ...any) {
	if msg == skipMsg {
		l.log.Warn("missed run: the previous write is still running", zap.Time("scheduled", time.Now().In(l.loc)))
		return
	}
	l.log.Sugar().Debugw("cron: "+msg, kv...)
}

// Error logs cron's errors (a job that panicked) at error level.
func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Sugar().Errorw("cron: "+msg, append(kv, "error", err)...)
}
