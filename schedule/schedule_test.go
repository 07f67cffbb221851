package schedule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/input"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

var emu *emulator.Emulator

func TestMain(m *testing.M) { os.Exit(emulator.Main(m, &emu)) }

// west is two hours behind UTC: the bubble's clock starts at midnight UTC
// on 2000-01-01, which is still 1999-12-31 there.
var west = time.FixedZone("UTC-2", -2*3600)

// recorder is a fake input and writer that records what it was asked.
type recorder struct {
	mu     sync.Mutex
	inputs []string
	writes []string
	// write, when set, decides the outcome of write number n (from 0).
	write func(ctx context.Context, n int) (*snapshot.Result, error)
	// input, when set, fails the input of read number n (from 0).
	input func(n int) error
}

func (r *recorder) Input(_ context.Context, date string) (*model.Snapshot, error) {
	r.mu.Lock()
	n := len(r.inputs)
	r.inputs = append(r.inputs, date)
	r.mu.Unlock()
	if r.input != nil {
		if err := r.input(n); err != nil {
			return nil, err
		}
	}
	return model.Generate(date, 2, 1), nil
}

func (r *recorder) Write(ctx context.Context, date string, snap *model.Snapshot) (*snapshot.Result, error) {
	r.mu.Lock()
	n := len(r.writes)
	r.writes = append(r.writes, date+"@"+time.Now().In(west).Format(time.TimeOnly))
	r.mu.Unlock()
	if snap.Payload.Metadata.DataAsOfDate != date {
		return nil, fmt.Errorf("input of %s written as %s", snap.Payload.Metadata.DataAsOfDate, date)
	}
	if r.write != nil {
		return r.write(ctx, n)
	}
	return &snapshot.Result{Outcome: snapshot.OutcomeComplete, Fence: "000000000000001", DistrictsWritten: 2, FailedDistricts: []string{}}, nil
}

// start runs a worker of r on spec until the returned stop is called; stop
// cancels, waits for Run and returns its error.
func start(t *testing.T, r *recorder, spec string, offset int) (logs *observer.ObservedLogs, stop func() error) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	w := &Worker{Spec: spec, Location: west, DateOffset: offset, Input: r.Input, Write: r.Write, Log: zap.New(core),
		ExitCode: func(err error) int {
			if err != nil {
				return 3
			}
			return 0
		}}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	return logs, func() error { cancel(); return <-errc }
}

// messages lists the messages logged, with their level, one per line.
func messages(logs *observer.ObservedLogs) string {
	var out []string
	for _, e := range logs.All() {
		if !strings.HasPrefix(e.Message, "cron: ") {
			out = append(out, e.Level.String()+" "+e.Message)
		}
	}
	return strings.Join(out, "\n")
}

// A schedule every second runs once a second, writes the date of the tick
// in the worker's time zone plus the offset, and logs each run.
func TestWorkerRunsEachTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		logs, stop := start(t, r, "* * * * * *", -1)
		time.Sleep(5*time.Second + 500*time.Millisecond)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		want := "1999-12-30@22:00:01 1999-12-30@22:00:02 1999-12-30@22:00:03 1999-12-30@22:00:04 1999-12-30@22:00:05"
		if got := strings.Join(r.writes, " "); got != want {
			t.Errorf("writes: %s, want %s", got, want)
		}
		runs := strings.Repeat("\ninfo run starting\ninfo run finished", 5)
		wantLogs := "info schedule started" + runs + "\ninfo stopping schedule: no new runs; waiting for the write in progress\ninfo schedule stopped"
		if got := messages(logs); got != wantLogs {
			t.Errorf("logs:\n%s\nwant:\n%s", got, wantLogs)
		}
		started := logs.FilterMessage("schedule started").All()[0].ContextMap()
		if started["cron"] != "* * * * * *" || started["timezone"] != "UTC-2" ||
			!started["next"].(time.Time).Equal(time.Date(1999, 12, 31, 22, 0, 1, 0, west)) {
			t.Errorf("schedule started: %v", started)
		}
		fin := logs.FilterMessage("run finished").All()[0].ContextMap()
		if fin["date"] != "1999-12-30" || fin["exitCode"] != int64(0) || fin["complete"] != true || fin["fence"] != "000000000000001" ||
			fin["districtsWritten"] != int64(2) || fin["failedDistricts"] != int64(0) {
			t.Errorf("run finished: %v", fin)
		}
	})
}

// A tick that comes while a write is running is skipped and logged as a
// missed run, once per tick, never queued.
func TestWorkerSkipsTickDuringWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{write: func(_ context.Context, n int) (*snapshot.Result, error) {
			if n == 0 {
				time.Sleep(1500 * time.Millisecond) // over the tick at 22:00:02
			}
			return &snapshot.Result{Outcome: snapshot.OutcomeComplete}, nil
		}}
		logs, stop := start(t, r, "* * * * * *", 0)
		time.Sleep(4*time.Second + 500*time.Millisecond)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Join(r.writes, " "), "1999-12-31@22:00:01 1999-12-31@22:00:03 1999-12-31@22:00:04"; got != want {
			t.Errorf("writes: %s, want %s", got, want)
		}
		missed := logs.FilterMessage("missed run: the previous write is still running").All()
		if len(missed) != 1 || missed[0].Level != zapcore.WarnLevel ||
			!missed[0].ContextMap()["scheduled"].(time.Time).Equal(time.Date(1999, 12, 31, 22, 0, 2, 0, west)) {
			t.Errorf("missed runs: %+v\n%s", missed, messages(logs))
		}
		if n := logs.FilterMessage("run finished").Len(); n != 3 {
			t.Errorf("%d runs finished, want 3", n)
		}
	})
}

// A run without usable input, or whose write fails, is logged as failed,
// and the worker carries on.
func TestWorkerCarriesOnAfterFailedRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{
			input: func(n int) error {
				if n == 0 {
					return fmt.Errorf("%w: input x does not exist", model.ErrInvalid)
				}
				return nil
			},
			write: func(_ context.Context, n int) (*snapshot.Result, error) {
				if n == 0 {
					return &snapshot.Result{Fence: "000000000000002", DistrictsWritten: 1, FailedDistricts: []string{"2"}}, errors.New("partial")
				}
				return &snapshot.Result{Outcome: snapshot.OutcomeComplete}, nil
			},
		}
		logs, stop := start(t, r, "@every 1s", 0)
		time.Sleep(3*time.Second + 500*time.Millisecond)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		want := "info schedule started\n" +
			"info run starting\nerror run failed: no usable input\n" +
			"info run starting\nerror run failed\n" +
			"info run starting\ninfo run finished\n" +
			"info stopping schedule: no new runs; waiting for the write in progress\ninfo schedule stopped"
		if got := messages(logs); got != want {
			t.Errorf("logs:\n%s\nwant:\n%s", got, want)
		}
		if len(r.writes) != 2 || len(r.inputs) != 3 {
			t.Errorf("inputs %v, writes %v", r.inputs, r.writes)
		}
		noInput := logs.FilterMessage("run failed: no usable input").All()[0].ContextMap()
		failed := logs.FilterMessage("run failed").All()[0].ContextMap()
		if !strings.Contains(fmt.Sprint(noInput["error"]), "input x does not exist") ||
			failed["exitCode"] != int64(3) || failed["complete"] != false || failed["failedDistricts"] != int64(1) || failed["error"] != "partial" {
			t.Errorf("failed runs: %v\n%v", noInput, failed)
		}
	})
}

// A run whose write panics is a failed run, logged with the stack, and the
// worker carries on.
func TestWorkerCarriesOnAfterPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{write: func(_ context.Context, n int) (*snapshot.Result, error) {
			if n == 0 {
				panic("injected")
			}
			return &snapshot.Result{Outcome: snapshot.OutcomeComplete}, nil
		}}
		logs, stop := start(t, r, "@every 1s", 0)
		time.Sleep(2*time.Second + 500*time.Millisecond)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		want := "info schedule started\n" +
			"info run starting\nerror run failed: panic\n" +
			"info run starting\ninfo run finished\n" +
			"info stopping schedule: no new runs; waiting for the write in progress\ninfo schedule stopped"
		if got := messages(logs); got != want {
			t.Errorf("logs:\n%s\nwant:\n%s", got, want)
		}
		p := logs.FilterMessage("run failed: panic").All()[0].ContextMap()
		if p["panic"] != "injected" || !strings.Contains(fmt.Sprint(p["stack"]), "schedule_test.go") {
			t.Errorf("panic line: %v", p)
		}
	})
}

// Stopping waits for the write in progress, which sees its context done,
// and starts no new run.
func TestWorkerStopWaitsForTheWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ended time.Time
		r := &recorder{write: func(ctx context.Context, _ int) (*snapshot.Result, error) {
			<-ctx.Done()
			time.Sleep(3 * time.Second) // the grace period of chunks in flight
			ended = time.Now()
			return &snapshot.Result{FailedDistricts: []string{"1", "2"}}, ctx.Err()
		}}
		logs, stop := start(t, r, "* * * * * *", 0)
		time.Sleep(1500 * time.Millisecond)
		t0 := time.Now()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d != 3*time.Second || !ended.Equal(time.Now()) {
			t.Errorf("Run returned %s after the stop, the write ended at %s", d, ended)
		}
		if len(r.writes) != 1 {
			t.Errorf("writes: %v", r.writes)
		}
		if n := logs.FilterMessage("missed run: the previous write is still running").Len(); n != 0 {
			t.Errorf("%d missed runs logged after the stop", n)
		}
		want := "info schedule started\ninfo run starting\ninfo stopping schedule: no new runs; waiting for the write in progress\n" +
			"error run failed\ninfo schedule stopped"
		if got := messages(logs); got != want {
			t.Errorf("logs:\n%s\nwant:\n%s", got, want)
		}
	})
}

func TestWorkerRefusesBadConfig(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	for name, w := range map[string]*Worker{
		"bad spec": {Spec: "61 * * * *", Input: r.Input, Write: r.Write},
		"no input": {Spec: "@daily", Write: r.Write},
		"no write": {Spec: "@daily", Input: r.Input},
	} {
		if err := w.Run(context.Background()); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	for _, spec := range []string{"0 6 * * *", "*/10 * * * * *", "@daily", "@every 1h30m"} {
		if _, err := Parse(spec); err != nil {
			t.Errorf("Parse(%q): %v", spec, err)
		}
	}
}

// Against the emulator, on the real clock: the worker writes the day's
// snapshot from a directory and stops cleanly.
func TestWorkerEmulator(t *testing.T) {
	t.Parallel()
	client := emu.TestClient(t)
	locker, err := firestorelock.New(client)
	if err != nil {
		t.Fatal(err)
	}
	sw, err := snapshot.NewWriter(client, locker)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	now := time.Now().UTC()
	days := []string{now.Format(time.DateOnly), now.Add(24 * time.Hour).Format(time.DateOnly)} // should the test cross midnight
	for _, d := range days {
		b, err := model.Marshal(model.Generate(d, 5, 1))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d+".json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	core, logs := observer.New(zapcore.InfoLevel)
	w := &Worker{Spec: "* * * * * *", Input: (&input.Loader{}).Dated(dir), Write: sw.Write, Log: zap.New(core)}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for logs.FilterMessage("run finished").Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	fin := logs.FilterMessage("run finished").All()
	if len(fin) == 0 {
		t.Fatalf("no run finished within 30 s:\n%s", messages(logs))
	}
	date := fin[0].ContextMap()["date"].(string)
	s, err := snapshot.NewReader(client, "").Summary(context.Background(), date)
	if err != nil || s.State != snapshot.StateComplete || s.Districts != 5 {
		t.Errorf("stored %s: %+v, %v", date, s, err)
	}
}

// A run the publication gate held is logged as held, at WARN: the write
// logged the one ERROR line to alert on. The worker carries on, and a
// failed run is still an ERROR.
func TestWorkerHeldRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{write: func(_ context.Context, n int) (*snapshot.Result, error) {
			if n == 0 {
				return &snapshot.Result{Outcome: snapshot.OutcomeHeld, FailedDistricts: []string{}}, fmt.Errorf("x: %w", snapshot.ErrHeld)
			}
			return nil, errors.New("boom")
		}}
		logs, stop := start(t, r, "* * * * * *", 0)
		time.Sleep(2*time.Second + 500*time.Millisecond)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		got := messages(logs)
		if !strings.Contains(got, "warn run held by the publication gate: nothing written\ninfo run starting\nerror run failed") {
			t.Errorf("logs:\n%s", got)
		}
	})
}
