package progress

import (
	"bytes"
	"errors"
	"strings"
	"testing"
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
