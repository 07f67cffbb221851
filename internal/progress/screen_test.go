package progress

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/snapwriter/snapwriter/internal/progress/termtest"
)

// render is what a terminal shows after out (termtest.Render); any
// escape sequence other than ESC [K fails the test.
func render(t *testing.T, out string) []string {
	t.Helper()
	lines, err := termtest.Render(out)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// Lines written while a bar shows appear above it, whole, and the bar
// under the last of them; a line written in parts keeps the bar out of
// its middle; after Stop, lines follow the bar's last state.
func TestScreenLinesAboveBar(t *testing.T) {
	var out bytes.Buffer
	s := NewScreen(&out)
	bar := New(s, ModeBar, 10, "write 2026-11-20")
	bar.Start()
	fmt.Fprintln(s, "lock acquired")
	_ = bar.Add(3)
	fmt.Fprint(s, "batch failed: ")
	_ = bar.Add(1) // not drawn into the half-written line
	fmt.Fprintln(s, "district 7")
	got := render(t, out.String())
	if len(got) != 3 || got[0] != "lock acquired" || got[1] != "batch failed: district 7" || !strings.Contains(got[2], "(4/10") {
		t.Fatalf("screen while the bar shows:\n%s", strings.Join(got, "\n"))
	}
	if err := bar.Stop(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(s, "snapwriter: partial")
	got = render(t, out.String())
	if len(got) != 4 || !strings.Contains(got[2], "(4/10") || got[3] != "snapwriter: partial" {
		t.Fatalf("screen after Stop:\n%s", strings.Join(got, "\n"))
	}
}

// Without a bar, a Screen writes what it is given, as it is.
func TestScreenNoBar(t *testing.T) {
	var out bytes.Buffer
	s := NewScreen(&out)
	fmt.Fprint(s, "a\nb")
	fmt.Fprintln(s, "c")
	if out.String() != "a\nbc\n" {
		t.Errorf("%q", out.String())
	}
	if New(s, ModeAuto, 5, "x") != nil {
		t.Error("auto on a Screen on a buffer (not a terminal): want no bar")
	}
}

// A bar advanced from one goroutine while lines are written from others
// never tears a line: every line is on the screen whole, in the order
// each writer wrote its own, and the bar ends at its count.
func TestScreenConcurrent(t *testing.T) {
	var out bytes.Buffer
	s := NewScreen(&out)
	const writers, each, steps = 4, 50, 200
	bar := New(s, ModeBar, steps, "write")
	bar.Start()
	var wg sync.WaitGroup
	wg.Go(func() {
		for range steps {
			_ = bar.Add(1)
		}
	})
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				fmt.Fprintf(s, "writer %d line %d\n", w, i)
			}
		})
	}
	wg.Wait()
	if err := bar.Finish(); err != nil {
		t.Fatal(err)
	}
	got := render(t, out.String())
	next := make([]int, writers)
	bars := 0
	for _, l := range got {
		var w, i int
		if _, err := fmt.Sscanf(l, "writer %d line %d", &w, &i); err == nil && l == fmt.Sprintf("writer %d line %d", w, i) {
			if i != next[w] {
				t.Fatalf("writer %d: line %d after %d", w, i, next[w]-1)
			}
			next[w]++
			continue
		}
		if !strings.HasPrefix(l, "write ") || !strings.Contains(l, fmt.Sprintf("/%d", steps)) {
			t.Fatalf("a line neither a whole log line nor the bar: %q", l)
		}
		bars++
	}
	for w, n := range next {
		if n != each {
			t.Errorf("writer %d: %d lines on the screen, want %d", w, n, each)
		}
	}
	if bars != 1 || !strings.Contains(got[len(got)-1], fmt.Sprintf("(%d/%d", steps, steps)) {
		t.Errorf("%d bars on the screen, the last line %q: want one, at the end, full", bars, got[len(got)-1])
	}
}

// On a terminal narrower than the bar's line, the bar is cut to the
// terminal's width (less its last column) rather than wrapped: a wrapped
// bar leaves a row behind at every redraw, since a carriage return goes
// back to the start of the last row only. Lines of text are not cut.
func TestScreenBarFitsTerminal(t *testing.T) {
	for _, cols := range []int{40, 60, 80} {
		t.Run(fmt.Sprint(cols), func(t *testing.T) {
			var out bytes.Buffer
			s := &Screen{w: &out, cols: func() int { return cols }}
			bar := New(s, ModeBar, 2000, "write 2026-11-20 ≤500/s (store pushed back 3×)", Rate("districts"))
			bar.Start()
			long := strings.Repeat("x", cols+10)
			for i := range 40 {
				_ = bar.Add(50)
				if i%10 == 0 {
					fmt.Fprintln(s, long)
				}
			}
			got, err := termtest.RenderCols(out.String(), cols)
			if err != nil {
				t.Fatal(err)
			}
			// 4 long lines of 2 rows each, and the bar's one row.
			if len(got) != 9 || !strings.HasPrefix(got[8], "write 2026-11-20") {
				t.Fatalf("screen %d wide: %d rows, want 9:\n%s", cols, len(got), strings.Join(got, "\n"))
			}
			if n := len([]rune(got[8])); n > cols-1 {
				t.Errorf("bar row of %d characters on a screen %d wide", n, cols)
			}
			// From 80 columns the bar itself narrows to leave room for its
			// count, which is what is read.
			if cols >= 80 && !strings.Contains(got[8], "(2000/2000") {
				t.Errorf("bar row %q on a screen %d wide: want its count", got[8], cols)
			}
		})
	}
	// The same bar on an unbounded screen is wider than 80 columns: the
	// cases above cut it.
	var out bytes.Buffer
	s := NewScreen(&out)
	bar := New(s, ModeBar, 2000, "write 2026-11-20 ≤500/s (store pushed back 3×)", Rate("districts"))
	_ = bar.Add(1000)
	if got := render(t, out.String()); len(got) != 1 || len([]rune(got[0])) <= 80 {
		t.Errorf("unbounded: %q, want one row over 80 characters", got)
	}
}
