package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/term"

	"github.com/snapwriter/snapwriter/input"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// backfillInput is one date's input under --input-dir: a Snapshot JSON
// file DIR/YYYY-MM-DD.json or a per-district directory DIR/YYYY-MM-DD/.
// problem, when set, says why the entry cannot be used; such an entry is
// reported, never skipped.
type backfillInput struct {
	date    string
	path    string
	problem string
}

// datedName matches the entries backfill reads: YYYY-MM-DD.json files and
// YYYY-MM-DD directories.
var datedName = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2})(\.json)?$`)

// listInputs finds the dated inputs in dir, oldest first. Symbolic links
// are followed, to files and to directories alike. Entries whose name does
// not look like a date are ignored; one that does but cannot be used (not a
// real date, a broken link, a directory named .json, a file without .json,
// a FIFO, …) is listed with its problem. A date given both as a file and as
// a directory is ambiguous and refused.
func listInputs(dir string) ([]backfillInput, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, usagef("--input-dir: %v", err)
	}
	byDate := map[string]backfillInput{}
	for _, e := range entries {
		name := e.Name()
		m := datedName.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		in := backfillInput{date: m[1], path: filepath.Join(dir, name)}
		in.problem = entryProblem(in.path, m[1], m[2] == ".json")
		if prev, dup := byDate[in.date]; dup {
			return nil, usagef("--input-dir: %s is given twice (%s and %s)", in.date, filepath.Base(prev.path), name)
		}
		byDate[in.date] = in
	}
	out := make([]backfillInput, 0, len(byDate))
	for _, in := range byDate {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].date < out[j].date })
	return out, nil
}

// entryProblem says why the dated entry at path cannot be used, or "" when
// it can: a .json name must be a regular file, a bare date a directory,
// after following symbolic links.
func entryProblem(path, date string, isFile bool) string {
	if !model.ValidDate(date) {
		return fmt.Sprintf("%s is not a real date", date)
	}
	fi, err := os.Stat(path)
	if err != nil {
		if li, lerr := os.Lstat(path); lerr == nil && li.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(path)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Sprintf("broken symbolic link to %s", target)
			}
			return fmt.Sprintf("symbolic link to %s cannot be followed: %v", target, unwrapPath(err))
		}
		return fmt.Sprintf("cannot be read: %v", unwrapPath(err))
	}
	kind := describeMode(fi.Mode())
	if li, err := os.Lstat(path); err == nil && li.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(path)
		kind = fmt.Sprintf("a symbolic link to %s, %s", target, kind)
	}
	switch {
	case isFile && !fi.Mode().IsRegular():
		return fmt.Sprintf("is %s; a snapshot file YYYY-MM-DD.json must be a regular file (a snapshot directory is named YYYY-MM-DD)", kind)
	case !isFile && !fi.IsDir():
		return fmt.Sprintf("is %s; a snapshot directory YYYY-MM-DD must be a directory (a snapshot file is named YYYY-MM-DD.json)", kind)
	}
	return ""
}

// describeMode names a file's type for a message.
func describeMode(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file (" + m.Type().String() + ")"
}

// unwrapPath drops the *fs.PathError's repetition of the path the message
// already names.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// shardOf is the task that writes date when count tasks share a backfill:
// the date's day number modulo count. It depends on the date alone, not on
// which files a task happens to see, so no date goes to two tasks and none
// is skipped; consecutive dates spread evenly over the tasks.
func shardOf(date string, count int) int {
	t, err := time.Parse(time.DateOnly, date)
	if err != nil {
		return -1
	}
	day := t.Unix() / 86400
	return int(((day % int64(count)) + int64(count)) % int64(count))
}

// taskShard reads this task's index and the task count from the flags, or
// from Cloud Run's CLOUD_RUN_TASK_INDEX / CLOUD_RUN_TASK_COUNT.
func (a *app) taskShard(index, count int) (int, int, error) {
	read := func(flag string, v int, env string, def int) (int, error) {
		if v >= 0 {
			return v, nil
		}
		s, ok := a.lookupEnv(env)
		if !ok || s == "" {
			return def, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, usagef("%s=%q: want a non-negative integer (or set --%s)", env, s, flag)
		}
		return n, nil
	}
	index, err := read("task-index", index, "CLOUD_RUN_TASK_INDEX", 0)
	if err != nil {
		return 0, 0, err
	}
	count, err = read("task-count", count, "CLOUD_RUN_TASK_COUNT", 1)
	if err != nil {
		return 0, 0, err
	}
	if count < 1 || index >= count {
		return 0, 0, usagef("task %d of %d: want 0 <= index < count", index, count)
	}
	return index, count, nil
}

// Outcomes of one date, from best to worst. The exit code of a backfill
// is the worst outcome's.
const (
	outcomeComplete   = "complete"
	outcomeSkipped    = "skipped"
	outcomePartial    = "partial"
	outcomeLockHeld   = "lock-held"
	outcomeFenced     = "fenced-out"
	outcomeFailed     = "failed"
	outcomeNotStarted = "not-started"
)

// severity orders exit codes by how much an operator must do about them:
// a partial date needs a repair, a held lock a rerun, a fenced-out write a
// look at who else writes, a failure or an interrupted run everything.
func severity(code int) int {
	switch code {
	case exitOK:
		return 0
	case exitPartial:
		return 1
	case exitLockHeld:
		return 2
	case exitFenced:
		return 3
	default:
		return 4
	}
}

// dateResult is one date's line in the backfill summary.
type dateResult struct {
	Date             string   `json:"date"`
	Outcome          string   `json:"outcome"`
	ExitCode         int      `json:"exitCode"`
	Fence            string   `json:"fence,omitempty"`
	DistrictsWritten int      `json:"districtsWritten"`
	FailedDistricts  []string `json:"failedDistricts,omitempty"`
	DurationMs       int64    `json:"durationMs"`
	Error            string   `json:"error,omitempty"`
}

// backfillSummary is what backfill prints at the end.
type backfillSummary struct {
	TaskIndex  int          `json:"taskIndex"`
	TaskCount  int          `json:"taskCount"`
	Complete   int          `json:"complete"`
	Partial    int          `json:"partial"`
	Failed     int          `json:"failed"`
	Skipped    int          `json:"skipped"`
	NotStarted int          `json:"notStarted"`
	ExitCode   int          `json:"exitCode"`
	Dates      []dateResult `json:"dates"`
}

// errBackfill carries a backfill's worst exit code once its summary is out.
type errBackfill struct {
	code int
	msg  string
}

func (e errBackfill) Error() string { return e.msg }

type backfillFlags struct {
	dir          string
	from, to     string
	skipComplete bool
	taskIndex    int
	taskCount    int
	asJSON       bool
	progress     string
}

func (a *app) backfillCommand() *cobra.Command {
	var f writeFlags
	var b backfillFlags
	cmd := &cobra.Command{
		Use:   "backfill --input-dir DIR [--from D] [--to D] [--skip-complete]",
		Short: "Write every dated snapshot under a directory, oldest first",
		Long: `Write every DIR/YYYY-MM-DD.json file (or per-district snapshot directory
DIR/YYYY-MM-DD/) whose date is within --from..--to (inclusive), oldest first,
one date at a time, each under its own snapshot lock.

Symbolic links are followed, to files and to directories. An entry named like a
date that cannot be used (a broken link, a directory named .json, a file without
.json, a FIFO, a date that does not exist) is reported, never skipped. Every input
of this task is read and validated before the first write: one bad or unusable
input stops the backfill with exit 2, every such input listed, nothing written.

Cloud Run job tasks split the dates between them: with CLOUD_RUN_TASK_INDEX and
CLOUD_RUN_TASK_COUNT set (or --task-index/--task-count), a task writes the dates
whose day number modulo the task count is its index, so no date is written by two
tasks and none is left out. --skip-complete leaves dates that are already
complete in Firestore alone, which makes a rerun (or a retried task) resume
where the last one stopped.

On a terminal a progress bar shows the dates; otherwise each date is one log
line. The summary counts complete, partial, failed and skipped dates, and the
exit code is the worst outcome: 1 (failed, or stopped by a signal before every
date was done) over 5 (fenced out) over 4 (lock held) over 3 (partial) over 0.`,
		Example: `  snapwriter backfill --input-dir ./snapshots --from 2026-01-01 --to 2026-03-31
  snapwriter backfill --input-dir /data/snapshots --skip-complete --json
  CLOUD_RUN_TASK_INDEX=1 CLOUD_RUN_TASK_COUNT=4 snapwriter backfill --input-dir ./snapshots`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.backfill(cmd, f, b) },
	}
	fl := cmd.Flags()
	fl.StringVar(&b.dir, "input-dir", "", "directory of YYYY-MM-DD.json files or YYYY-MM-DD/ directories (required)")
	fl.StringVar(&b.from, "from", "", "first date to write (YYYY-MM-DD, inclusive)")
	fl.StringVar(&b.to, "to", "", "last date to write (YYYY-MM-DD, inclusive)")
	fl.BoolVar(&b.skipComplete, "skip-complete", false, "leave dates that are already complete in Firestore alone")
	fl.IntVar(&b.taskIndex, "task-index", -1, "this task's index (default CLOUD_RUN_TASK_INDEX, else 0)")
	fl.IntVar(&b.taskCount, "task-count", -1, "number of tasks sharing the dates (default CLOUD_RUN_TASK_COUNT, else 1)")
	fl.BoolVar(&b.asJSON, "json", false, "print the summary as JSON")
	fl.StringVar(&b.progress, "progress", "auto", "progress display: auto (a bar on a terminal), bar, or log")
	f.register(fl)
	registerTimeout(fl, snapshot.DefaultRequestTimeout, writeTimeoutUsage)
	_ = cmd.MarkFlagRequired("input-dir")
	return cmd
}

func (a *app) backfill(cmd *cobra.Command, f writeFlags, b backfillFlags) error {
	if err := f.validate(); err != nil {
		return err
	}
	for _, d := range []struct{ flag, v string }{{"from", b.from}, {"to", b.to}} {
		if d.v != "" && !model.ValidDate(d.v) {
			return usagef("--%s %q: want a real YYYY-MM-DD date", d.flag, d.v)
		}
	}
	if b.from != "" && b.to != "" && b.from > b.to {
		return usagef("--from %s is after --to %s", b.from, b.to)
	}
	if b.progress != "auto" && b.progress != "bar" && b.progress != "log" {
		return usagef("--progress %q: want auto, bar or log", b.progress)
	}
	index, count, err := a.taskShard(b.taskIndex, b.taskCount)
	if err != nil {
		return err
	}
	all, err := listInputs(b.dir)
	if err != nil {
		return err
	}
	var mine []backfillInput
	for _, in := range all {
		// A name that is no real date belongs to no task: every task
		// reports it.
		shard := shardOf(in.date, count)
		if (b.from == "" || in.date >= b.from) && (b.to == "" || in.date <= b.to) && (shard == index || shard < 0) {
			mine = append(mine, in)
		}
	}
	ctx := cmd.Context()
	client, err := a.client(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	reader := snapshot.NewReader(client, a.global.collection)

	// With --skip-complete, one listing (a projection of each root) tells
	// which dates are done, so a daily rerun over a year of files neither
	// parses nor locks the old ones. The writer checks again under the lock.
	complete := map[string]string{} // date → writer fence
	if b.skipComplete {
		lctx, cancel := context.WithTimeout(ctx, a.bound())
		list, err := reader.List(lctx)
		cancel()
		if err != nil {
			return a.firestoreWait(err)
		}
		for _, s := range list {
			if s.State == "complete" {
				complete[s.SnapshotID] = s.WriterFence
			}
		}
	}
	// Validate everything first: a bad file found halfway through would
	// leave the backfill half done for a reason known from the start.
	if err := validateInputs(mine, complete); err != nil {
		return err
	}
	log := a.log.With(zap.Int("taskIndex", index), zap.Int("taskCount", count))
	log.Info("backfill starting", zap.Int("dates", len(mine)), zap.Int("alreadyComplete", len(complete)),
		zap.Int("datesInDir", len(all)), zap.String("from", b.from), zap.String("to", b.to), zap.Bool("skipComplete", b.skipComplete))

	bar := a.progressBar(b.progress, len(mine))
	writerLog := a.log
	if bar != nil {
		// Per-batch lines would tear the bar apart; warnings still show.
		writerLog = a.log.WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))
	}
	w, closeLocker, err := a.newWriter(ctx, client, f, snapshot.WithSkipComplete(b.skipComplete), snapshot.WithLogger(writerLog))
	if err != nil {
		return err
	}
	defer closeLocker()
	sum := backfillSummary{TaskIndex: index, TaskCount: count, Dates: []dateResult{}}
	// A store that did not answer stops the backfill: every further date
	// would wait as long in vain. A rerun with --skip-complete resumes.
	var stopped string
	for _, in := range mine {
		var r dateResult
		if fence, done := complete[in.date]; done {
			r = dateResult{Date: in.date, Outcome: outcomeSkipped, Fence: fence}
		} else if ctx.Err() != nil {
			r = dateResult{Date: in.date, Outcome: outcomeNotStarted, ExitCode: exitError, Error: "not started: " + context.Cause(ctx).Error()}
		} else if stopped != "" {
			r = dateResult{Date: in.date, Outcome: outcomeNotStarted, ExitCode: exitError, Error: "not started: " + stopped}
		} else {
			if bar != nil {
				bar.Describe(in.date)
			}
			var werr *waitError
			if r, werr = a.backfillDate(cmd, f, w, reader, in, b.skipComplete); werr != nil {
				stopped = fmt.Sprintf("the backfill stopped at %s: %s", in.date, werr.short())
			}
		}
		sum.add(r)
		fields := []zap.Field{zap.String("date", r.Date), zap.String("outcome", r.Outcome), zap.String("fence", r.Fence),
			zap.Int("districtsWritten", r.DistrictsWritten), zap.Int("failedDistricts", len(r.FailedDistricts)),
			zap.Int64("durationMs", r.DurationMs)}
		if r.Error != "" {
			fields = append(fields, zap.String("error", r.Error))
		}
		switch {
		case bar != nil:
			_ = bar.Add(1)
			if r.ExitCode != exitOK {
				log.Warn("date not complete", fields...)
			}
		case r.ExitCode != exitOK:
			log.Warn("date done", fields...)
		default:
			log.Info("date done", fields...)
		}
	}
	if bar != nil {
		_ = bar.Finish()
		fmt.Fprintln(a.stderr)
	}
	log.Log(levelFor(sum.ExitCode), "backfill finished", zap.Int("complete", sum.Complete), zap.Int("partial", sum.Partial),
		zap.Int("failed", sum.Failed), zap.Int("skipped", sum.Skipped), zap.Int("notStarted", sum.NotStarted),
		zap.Int("exitCode", sum.ExitCode))
	if err := sum.print(a.stdout, b.asJSON); err != nil {
		return err
	}
	if sum.ExitCode != exitOK {
		msg := fmt.Sprintf("backfill: %d complete, %d partial, %d failed, %d skipped, %d not started",
			sum.Complete, sum.Partial, sum.Failed, sum.Skipped, sum.NotStarted)
		if stopped != "" {
			// Say which store did not answer, not just the count.
			msg += "; " + stopped
		}
		return errBackfill{code: sum.ExitCode, msg: msg}
	}
	return nil
}

// validateInputs reads and validates every input of this task that is not
// already complete, and reports every one that cannot be used: an entry
// that is no usable file or directory (a broken link, a FIFO, …) as well as
// invalid content. Any of them is exit 2, before the first write.
func validateInputs(mine []backfillInput, complete map[string]string) error {
	var bad []string
	checked := 0
	for _, in := range mine {
		if _, done := complete[in.date]; done {
			continue
		}
		checked++
		if in.problem != "" {
			bad = append(bad, in.path+": "+in.problem)
			continue
		}
		if _, err := input.LoadDated(in.path, in.date); err != nil {
			if !errors.Is(err, model.ErrInvalid) {
				return err
			}
			bad = append(bad, strings.ReplaceAll(err.Error(), "\n", "\n    "))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return errBackfill{code: exitUsage, msg: fmt.Sprintf("backfill: %d of %d dated inputs cannot be used; nothing was written:\n  %s",
		len(bad), checked, strings.Join(bad, "\n  "))}
}

// backfillDate writes one date and reports how it went. A non-nil
// waitError says that Firestore or the lock store did not answer, which
// stops the backfill.
func (a *app) backfillDate(cmd *cobra.Command, f writeFlags, w *snapshot.Writer, reader *snapshot.Reader, in backfillInput, skipComplete bool) (dateResult, *waitError) {
	ctx := cmd.Context()
	t0 := time.Now()
	r := dateResult{Date: in.date}
	done := func() dateResult { r.DurationMs = time.Since(t0).Milliseconds(); return r }
	if skipComplete {
		// A read first, so a rerun over finished dates takes no locks;
		// the writer checks again under the lock.
		rctx, cancel := context.WithTimeout(ctx, a.bound())
		s, err := reader.Summary(rctx, in.date)
		cancel()
		if err == nil && s.State == snapshot.StateComplete {
			r.Outcome, r.Fence = outcomeSkipped, s.WriterFence
			return done(), nil
		}
		var we *waitError
		if err != nil && ctx.Err() == nil && errors.As(a.firestoreWait(err), &we) {
			r.Outcome, r.ExitCode, r.Error = outcomeFailed, exitError, we.Error()
			return done(), we
		}
	}
	snap, err := input.LoadDated(in.path, in.date)
	if err != nil {
		r.Outcome, r.ExitCode, r.Error = outcomeFailed, exitCode(err), err.Error()
		return done(), nil
	}
	res, werr := w.Write(ctx, in.date, snap)
	if res != nil {
		r.Fence, r.DistrictsWritten, r.FailedDistricts = res.Fence, res.DistrictsWritten, res.FailedDistricts
	}
	err = a.writeWait(outcome(res, werr), f)
	r.ExitCode = exitCode(err)
	var stop *waitError
	if err != nil {
		r.Error = err.Error()
		errors.As(err, &stop)
	}
	switch {
	case res != nil && res.Skipped:
		r.Outcome = outcomeSkipped
	case r.ExitCode == exitOK:
		r.Outcome = outcomeComplete
	case r.ExitCode == exitPartial:
		r.Outcome = outcomePartial
	case r.ExitCode == exitLockHeld:
		r.Outcome = outcomeLockHeld
	case r.ExitCode == exitFenced:
		r.Outcome = outcomeFenced
	default:
		r.Outcome = outcomeFailed
	}
	return done(), stop
}

func (s *backfillSummary) add(r dateResult) {
	switch r.Outcome {
	case outcomeComplete:
		s.Complete++
	case outcomeSkipped:
		s.Skipped++
	case outcomePartial:
		s.Partial++
	case outcomeNotStarted:
		s.NotStarted++
	default:
		s.Failed++
	}
	if severity(r.ExitCode) > severity(s.ExitCode) {
		s.ExitCode = r.ExitCode
	}
	s.Dates = append(s.Dates, r)
}

func (s *backfillSummary) print(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DATE\tOUTCOME\tDISTRICTS\tFAILED\tFENCE\tERROR")
	for _, r := range s.Dates {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", r.Date, r.Outcome, r.DistrictsWritten, len(r.FailedDistricts), r.Fence, r.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "task %d/%d: %d complete, %d partial, %d failed, %d skipped, %d not started\n",
		s.TaskIndex, s.TaskCount, s.Complete, s.Partial, s.Failed, s.Skipped, s.NotStarted)
	return err
}

// progressBar returns a bar on stderr when mode asks for one, or when mode
// is auto and stderr is a terminal; nil means one log line per date.
func (a *app) progressBar(mode string, n int) *progressbar.ProgressBar {
	if mode == "log" || n == 0 {
		return nil
	}
	if mode == "auto" {
		f, ok := a.stderr.(*os.File)
		if !ok || !term.IsTerminal(int(f.Fd())) {
			return nil
		}
	}
	return progressbar.NewOptions(n,
		progressbar.OptionSetWriter(a.stderr),
		progressbar.OptionSetDescription("backfill"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetWidth(30),
	)
}

func levelFor(code int) zapcore.Level {
	if code == exitOK {
		return zapcore.InfoLevel
	}
	return zapcore.WarnLevel
}
