// Package backfill writes a directory of dated snapshot inputs into
// Firestore, oldest first, one date at a time, each under its own snapshot
// lock, and says how each date ended.
//
// List finds the inputs, Select picks a task's share of them (Cloud Run job
// tasks split the dates with Shard), Check validates them before the first
// write, and Run writes them and returns a Summary. What a caller shows
// while it runs, and how it reports the outcomes, is the caller's.
package backfill

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/input"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/outcome"
	"github.com/snapwriter/snapwriter/snapshot"
)

// DateResult is how one date went.
type DateResult struct {
	Date             string
	Outcome          outcome.Outcome
	Fence            string // the writer fence, when the date was written or skipped
	DistrictsWritten int
	FailedDistricts  []string
	Duration         time.Duration
	// Err says why the date is not Complete or Skipped; nil when it is.
	Err error
}

// Summary is how a backfill went, date by date, with counts.
type Summary struct {
	// Counts of the dates by outcome; Failed counts those that are Failed,
	// LockHeld or FencedOut. Held counts the dates the publication gate
	// held (snapshot.WithGate).
	Complete, Partial, Failed, Skipped, NotStarted, NotReady, Held int
	// Dates are the results in the order the dates were taken.
	Dates []DateResult
	// Stopped, when not nil, says why the backfill stopped before its last
	// date (a store that did not answer); the dates after are NotStarted.
	Stopped error
}

// Add counts r and appends it to the dates.
func (s *Summary) Add(r DateResult) {
	switch r.Outcome {
	case outcome.Complete:
		s.Complete++
	case outcome.Skipped:
		s.Skipped++
	case outcome.Partial:
		s.Partial++
	case outcome.NotStarted:
		s.NotStarted++
	case outcome.NotReady:
		s.NotReady++
	case outcome.Held:
		s.Held++
	default:
		s.Failed++
	}
	s.Dates = append(s.Dates, r)
}

// Worst returns the first date with the highest Severity, and false when
// there are no dates.
func (s *Summary) Worst() (DateResult, bool) {
	if len(s.Dates) == 0 {
		return DateResult{}, false
	}
	worst := s.Dates[0]
	for _, r := range s.Dates[1:] {
		if r.Outcome.Severity() > worst.Outcome.Severity() {
			worst = r
		}
	}
	return worst, true
}

// Writer writes one date's snapshot; *snapshot.Writer is one.
type Writer interface {
	Write(ctx context.Context, id string, snap *model.Snapshot) (*snapshot.Result, error)
}

// Reader reads what is stored; *snapshot.Reader is one.
type Reader interface {
	Summary(ctx context.Context, id string) (*snapshot.Summary, error)
	List(ctx context.Context) ([]snapshot.Summary, error)
}

// Completed returns the dates whose stored snapshot is complete, with their
// writer fence, from one listing: a daily rerun over a year of inputs then
// neither reads nor locks the old ones (Options.Complete).
func Completed(ctx context.Context, r Reader) (map[string]string, error) {
	list, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	complete := map[string]string{}
	for _, s := range list {
		if s.State == snapshot.StateComplete {
			complete[s.SnapshotID] = s.WriterFence
		}
	}
	return complete, nil
}

// Options say how Run writes its dates.
type Options struct {
	// Writer writes each date; required.
	Writer Writer
	// Loader reads each date's input; nil reads local inputs only.
	Loader *input.Loader
	// SkipComplete reads each date's stored state with Reader before its
	// write and skips a complete one without taking its lock. The Writer
	// should check again under the lock (snapshot.WithSkipComplete).
	SkipComplete bool
	// Reader is required with SkipComplete.
	Reader Reader
	// ReadTimeout bounds each of SkipComplete's reads; 0: no bound.
	ReadTimeout time.Duration
	// Complete holds dates known to be complete, with their writer fence
	// (from Completed): they are Skipped without a read.
	Complete map[string]string

	// Unanswered, when set, is given the error of every date that failed.
	// When err means that Firestore or the lock store did not answer, it
	// returns a short reason to stop, and Run stops: every later date
	// would wait as long in vain, so they are NotStarted, and a rerun with
	// SkipComplete resumes. It also returns the error to report for the
	// date: err, or err reworded (naming the store, say); nil keeps err.
	Unanswered func(err error) (stop string, report error)

	// Log, when set, gets one line per date ("date done", with its
	// outcome, fence, districts written and duration): Info for a date
	// complete or skipped, Warn otherwise.
	Log *zap.Logger
	// Progress, when set, is told each date before its read or write
	// begins (Describe) and once it is done (Add(1)); a
	// *progressbar.ProgressBar is one.
	Progress Progress
}

// Progress follows a backfill date by date.
type Progress interface {
	Describe(date string)
	Add(n int) error
}

// Run writes inputs in order, one date at a time, and returns how each
// went. It does not stop at a failed date: only a cancelled ctx or a store
// that did not answer (Options.Unanswered) ends it early, and the dates it
// did not reach are NotStarted. Check the inputs first: Run reads each one
// again just before writing it.
func Run(ctx context.Context, inputs []Input, opts Options) *Summary {
	sum := &Summary{Dates: []DateResult{}}
	for _, in := range inputs {
		var r DateResult
		if fence, done := opts.Complete[in.Date]; done {
			r = DateResult{Date: in.Date, Outcome: outcome.Skipped, Fence: fence}
		} else if ctx.Err() != nil {
			r = DateResult{Date: in.Date, Outcome: outcome.NotStarted, Err: fmt.Errorf("not started: %w", context.Cause(ctx))}
		} else if sum.Stopped != nil {
			r = DateResult{Date: in.Date, Outcome: outcome.NotStarted, Err: fmt.Errorf("not started: %w", sum.Stopped)}
		} else {
			if opts.Progress != nil {
				opts.Progress.Describe(in.Date)
			}
			var stop string
			r, stop = opts.date(ctx, in)
			if stop != "" {
				sum.Stopped = fmt.Errorf("the backfill stopped at %s: %s", in.Date, stop)
			}
		}
		sum.Add(r)
		opts.done(r)
	}
	return sum
}

// done logs r and counts it in the progress.
func (o *Options) done(r DateResult) {
	if o.Progress != nil {
		_ = o.Progress.Add(1)
	}
	if o.Log == nil {
		return
	}
	fields := []zap.Field{zap.String("date", r.Date), zap.String("outcome", string(r.Outcome)), zap.String("fence", r.Fence),
		zap.Int("districtsWritten", r.DistrictsWritten), zap.Int("failedDistricts", len(r.FailedDistricts)),
		zap.Int64("durationMs", r.Duration.Milliseconds())}
	if r.Err != nil {
		fields = append(fields, zap.String("error", r.Err.Error()))
	}
	lvl := zap.InfoLevel
	if r.Outcome.Severity() > 0 {
		lvl = zap.WarnLevel
	}
	o.Log.Log(lvl, "date done", fields...)
}

// date writes one date. A stop reason says that a store did not answer.
func (o *Options) date(ctx context.Context, in Input) (DateResult, string) {
	t0 := time.Now()
	r := DateResult{Date: in.Date}
	done := func(stop string) (DateResult, string) { r.Duration = time.Since(t0); return r, stop }
	if o.SkipComplete {
		// A read first, so a rerun over finished dates takes no locks.
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if o.ReadTimeout > 0 {
			rctx, cancel = context.WithTimeout(ctx, o.ReadTimeout)
		}
		s, err := o.Reader.Summary(rctx, in.Date)
		cancel()
		if err == nil && s.State == snapshot.StateComplete {
			r.Outcome, r.Fence = outcome.Skipped, s.WriterFence
			return done("")
		}
		// Any other failure of the read is left to the write, which reads
		// again under the lock; only a store that did not answer stops.
		if err != nil && ctx.Err() == nil {
			if stop, report := o.unanswered(err); stop != "" {
				r.Outcome, r.Err = outcome.Failed, report
				return done(stop)
			}
		}
	}
	snap, err := loaderOf(o.Loader).LoadDated(ctx, in.Path, in.Date)
	if err != nil {
		// Failed, or NotReady for an upload not finished.
		r.Outcome, r.Err = outcome.Of(err), err
		return done("")
	}
	defer snap.Close()
	res, err := o.Writer.Write(ctx, in.Date, snap)
	if res != nil {
		r.Fence, r.DistrictsWritten, r.FailedDistricts = res.Fence, res.DistrictsWritten, res.FailedDistricts
	}
	r.Outcome, r.Err = classify(res, err)
	var stop string
	if r.Outcome == outcome.Failed {
		stop, r.Err = o.unanswered(r.Err)
	}
	return done(stop)
}

// unanswered asks Options.Unanswered about err.
func (o *Options) unanswered(err error) (stop string, report error) {
	if o.Unanswered == nil {
		return "", err
	}
	stop, report = o.Unanswered(err)
	if report == nil {
		report = err
	}
	return stop, report
}

// classify says how a write that returned res and err ended: skipped or
// complete, else as the error says (outcome.Of).
func classify(res *snapshot.Result, err error) (outcome.Outcome, error) {
	switch {
	case res != nil && res.Outcome == snapshot.OutcomeSkipped:
		return outcome.Skipped, err
	case err == nil:
		return outcome.Complete, nil
	}
	return outcome.Of(err), err
}

// loaderOf is l, or a Loader of local inputs when l is nil.
func loaderOf(l *input.Loader) *input.Loader {
	if l == nil {
		return &input.Loader{}
	}
	return l
}
