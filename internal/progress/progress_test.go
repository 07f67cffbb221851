package progress

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestCheckMode(t *testing.T) {
	for _, m := range []string{ModeAuto, ModeBar, ModeLog} {
		if err := CheckMode(m); err != nil {
			t.Errorf("CheckMode(%q) = %v", m, err)
		}
	}
	for _, m := range []string{"", "Bar", "tty"} {
		if err := CheckMode(m); !errors.Is(err, ErrMode) {
			t.Errorf("CheckMode(%q) = %v, want ErrMode", m, err)
		}
	}
}

func TestNew(t *testing.T) {
	var w bytes.Buffer
	if New(&w, ModeAuto, 5, "x") != nil {
		t.Error("auto on a buffer (not a terminal): want no bar")
	}
	if New(&w, ModeLog, 5, "x") != nil || New(&w, ModeBar, 0, "x") != nil {
		t.Error("log mode, or nothing to count: want no bar")
	}
	bar := New(&w, ModeBar, 2, "backfill")
	if bar == nil {
		t.Fatal("bar mode: want a bar")
	}
	_ = bar.Add(2)
	if !strings.Contains(w.String(), "backfill") || !strings.Contains(w.String(), "2/2") {
		t.Errorf("bar output %q: want its description and count", w.String())
	}
}

// A nil *Bar (no bar wanted) does nothing and leaves the logger as it is;
// a shown one ends its line on Finish and quiets the logger to warnings.
func TestBarNilAndQuiet(t *testing.T) {
	var none *Bar
	none.Describe("x")
	if err := none.Add(1); err != nil {
		t.Error(err)
	}
	if err := none.Finish(); err != nil {
		t.Error(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	if none.Quiet(log) != log {
		t.Error("no bar: Quiet changed the logger")
	}

	var w bytes.Buffer
	bar := New(&w, ModeBar, 2, "backfill")
	bar.Describe("2026-01-01")
	_ = bar.Add(1)
	if err := bar.Finish(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(w.String(), "2026-01-01") || !strings.HasSuffix(w.String(), "\n") {
		t.Errorf("bar output %q: want the step described and a line ended", w.String())
	}
	q := bar.Quiet(log)
	q.Info("routine")
	q.Warn("warning")
	if got := logs.All(); len(got) != 1 || got[0].Message != "warning" {
		t.Errorf("quieted logger logged %v, want only the warning", got)
	}
}

// Rate adds the rate; Start draws the bar at 0 at once; Stop leaves it
// short of its total and ends its line.
func TestRateStartStop(t *testing.T) {
	var w bytes.Buffer
	bar := New(&w, ModeBar, 10, "write 2026-11-20", Rate("districts"))
	bar.Start()
	if !strings.Contains(w.String(), "(0/10") {
		t.Errorf("after Start %q: want the bar at 0", w.String())
	}
	_ = bar.Add(4)
	if err := bar.Stop(); err != nil {
		t.Fatal(err)
	}
	_ = bar.Add(1) // after Stop: not drawn
	out := w.String()
	for _, want := range []string{"write 2026-11-20", "(4/10", "districts/"} {
		if !strings.Contains(out, want) {
			t.Errorf("bar output %q: want %q", out, want)
		}
	}
	if strings.Contains(out, "5/10") || strings.Contains(out, "10/10") || !strings.HasSuffix(out, "\n") {
		t.Errorf("bar output %q: want it stopped at 4/10 and its line ended", out)
	}
	var none *Bar
	none.Start()
	if err := none.Stop(); err != nil {
		t.Error(err)
	}
}
