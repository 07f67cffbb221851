package main

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/input"
	"github.com/snapwriter/snapwriter/snapshot"
)

// cronParser takes standard 5-field expressions, an optional leading
// seconds field, and descriptors such as @daily or @every 1h.
func cronParser() cron.Parser {
	return cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
}

type scheduleFlags struct {
	cron        string
	timezone    string
	inputDir    string
	inputURL    string
	dateOffset  int
	httpTimeout time.Duration
}

func (a *app) scheduleCommand() *cobra.Command {
	var f writeFlags
	var s scheduleFlags
	cmd := &cobra.Command{
		Use:   "schedule --cron EXPR [--timezone TZ] --input-dir DIR|--input-url URL",
		Short: "Long-running: write the day's snapshot on a cron schedule",
		Long: `Run as a worker that writes one snapshot per cron tick. The snapshot date is the
tick's date in --timezone plus --date-offset days; its input is DIR/YYYY-MM-DD.json
(or the snapshot directory DIR/YYYY-MM-DD/) with --input-dir, or an HTTP GET of
--input-url with {date} replaced by the date.

--cron takes the standard five fields (minute hour day-of-month month
day-of-week), an optional leading seconds field, or a descriptor (@daily,
@hourly, @every 30m). Writes never overlap: a tick that comes while a write is
still running is logged as a missed run and skipped. A run that fails (input
missing, invalid, lock held, partial) is logged and the worker carries on.

SIGTERM or SIGINT stops the schedule: no new run starts, a write in progress
stops like 'write' does on a signal (chunks in flight get --grace-period, the
manifest records the partial state, the lock is released), and the worker exits 0.`,
		Example: `  snapwriter schedule --cron '0 6 * * *' --timezone Europe/Berlin --input-dir /data/snapshots
  snapwriter schedule --cron '30 5 * * *' --date-offset -1 --input-url 'https://exports.example.com/{date}.json'
  SNAPWRITER_CRON='@every 1h' SNAPWRITER_INPUT_DIR=/data snapwriter schedule`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.schedule(cmd, f, s) },
	}
	fl := cmd.Flags()
	fl.StringVar(&s.cron, "cron", "", "cron expression: 5 fields, 6 with leading seconds, or @daily/@every D (required)")
	fl.StringVar(&s.timezone, "timezone", "UTC", "IANA time zone of the cron expression and of the snapshot date")
	fl.StringVar(&s.inputDir, "input-dir", "", "directory holding YYYY-MM-DD.json files or YYYY-MM-DD/ directories")
	fl.StringVar(&s.inputURL, "input-url", "", "http(s) URL of the Snapshot JSON; {date} is replaced by the date")
	fl.IntVar(&s.dateOffset, "date-offset", 0, "days added to the tick's date to get the snapshot date (-1: yesterday)")
	fl.DurationVar(&s.httpTimeout, "http-timeout", 2*time.Minute, "timeout of one --input-url download")
	f.register(fl)
	registerTimeout(fl, snapshot.DefaultRequestTimeout, writeTimeoutUsage)
	_ = cmd.MarkFlagRequired("cron")
	return cmd
}

// scheduleRun is what one tick needs.
type scheduleRun struct {
	a      *app
	s      scheduleFlags
	f      writeFlags
	loc    *time.Location
	writer *snapshot.Writer
	input  input.Source
	log    *zap.Logger
}

func (a *app) schedule(cmd *cobra.Command, f writeFlags, s scheduleFlags) error {
	if err := f.validate(); err != nil {
		return err
	}
	loc, err := time.LoadLocation(s.timezone)
	if err != nil || s.timezone == "" || strings.EqualFold(s.timezone, "local") {
		return usagef("--timezone %q: want an IANA time zone such as UTC or Europe/Berlin", s.timezone)
	}
	sched, err := cronParser().Parse(s.cron)
	if err != nil {
		return usagef("--cron %q: %v", s.cron, err)
	}
	switch {
	case (s.inputDir == "") == (s.inputURL == ""):
		return usagef("give exactly one of --input-dir and --input-url")
	case s.dateOffset < -366 || s.dateOffset > 366:
		return usagef("--date-offset %d: want -366..366", s.dateOffset)
	case s.httpTimeout <= 0:
		return usagef("--http-timeout %s: must be positive", s.httpTimeout)
	}
	if s.inputDir != "" {
		if st, err := os.Stat(s.inputDir); err != nil || !st.IsDir() {
			return usagef("--input-dir %q: not a directory", s.inputDir)
		}
	} else if u, err := url.Parse(s.inputURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--input-url %q: want an http or https URL", s.inputURL)
	}

	ctx := cmd.Context()
	client, err := a.client(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	w, closeLocker, err := a.newWriter(ctx, client, f)
	if err != nil {
		return err
	}
	defer closeLocker()
	src := input.Dir(s.inputDir)
	if s.inputURL != "" {
		src = input.URL(s.inputURL, &http.Client{Timeout: s.httpTimeout})
	}
	log := a.log.With(zap.String("cron", s.cron), zap.String("timezone", loc.String()))
	r := &scheduleRun{a: a, s: s, f: f, loc: loc, writer: w, input: src, log: log}

	var running atomic.Bool
	c := cron.New(cron.WithLocation(loc), cron.WithParser(cronParser()), cron.WithLogger(cronLogger{log}))
	c.Schedule(sched, cron.FuncJob(func() {
		tick := time.Now().In(loc)
		// One write at a time; a tick that finds one running is logged,
		// not queued (a queue would write stale days late) nor dropped
		// silently.
		if !running.CompareAndSwap(false, true) {
			log.Warn("missed run: the previous write is still running", zap.Time("scheduled", tick))
			return
		}
		defer running.Store(false)
		r.run(ctx, tick)
	}))
	c.Start()
	log.Info("schedule started", zap.Time("next", sched.Next(time.Now().In(loc))))
	<-ctx.Done()
	log.Info("stopping schedule: no new runs; waiting for the write in progress", zap.String("cause", context.Cause(ctx).Error()))
	<-c.Stop().Done()
	log.Info("schedule stopped")
	return nil
}

// run writes the snapshot of one tick and logs how it went.
func (r *scheduleRun) run(ctx context.Context, tick time.Time) {
	date := tick.AddDate(0, 0, r.s.dateOffset).Format(time.DateOnly)
	log := r.log.With(zap.String("date", date), zap.Time("tick", tick))
	if ctx.Err() != nil {
		return
	}
	log.Info("run starting")
	t0 := time.Now()
	snap, err := r.input(ctx, date)
	if err != nil {
		log.Error("run failed: no usable input", zap.Error(err))
		return
	}
	res, werr := r.writer.Write(ctx, date, snap)
	err = r.a.writeWait(outcome(res, werr), r.f)
	fields := []zap.Field{zap.Int("exitCode", exitCode(err)), zap.Int64("durationMs", time.Since(t0).Milliseconds())}
	if res != nil {
		fields = append(fields, zap.Bool("complete", res.Complete), zap.String("fence", res.Fence),
			zap.Int("districtsWritten", res.DistrictsWritten), zap.Int("failedDistricts", len(res.FailedDistricts)))
	}
	if err != nil {
		log.Error("run failed", append(fields, zap.Error(err))...)
		return
	}
	log.Info("run finished", fields...)
}

// cronLogger sends robfig/cron's own messages to zap: its routine ones at
// debug level, its errors (a panicking job) at error level.
type cronLogger struct{ log *zap.Logger }

func (l cronLogger) Info(msg string, kv ...any) { l.log.Sugar().Debugw("cron: "+msg, kv...) }

func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Sugar().Errorw("cron: "+msg, append(kv, "error", err)...)
}
