// Package progress shows how far a long command has come: a bar on a
// terminal, nothing where logs go to a file or Cloud Logging (there the
// command's log lines say it).
package progress

import (
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"go.uber.org/zap"
	"golang.org/x/term"
)

// Modes of display, as a --progress flag takes them.
const (
	ModeAuto = "auto" // a bar when the output is a terminal
	ModeBar  = "bar"  // always a bar
	ModeLog  = "log"  // never a bar
)

// ErrMode is CheckMode's error for a mode that is not ModeAuto, ModeBar
// or ModeLog.
var ErrMode = errors.New("want auto, bar or log")

// CheckMode refuses a mode that is not ModeAuto, ModeBar or ModeLog.
func CheckMode(mode string) error {
	if mode != ModeAuto && mode != ModeBar && mode != ModeLog {
		return ErrMode
	}
	return nil
}

// Bar is a progress bar on show. A nil *Bar is the bar that the mode or
// the output did not want: its methods do nothing, so that callers need
// not ask, and it is a backfill.Progress like any other.
type Bar struct {
	bar *progressbar.ProgressBar
	w   io.Writer
}

// Option adds to what a bar shows.
type Option func(*progressbar.ProgressBar)

// Rate shows how many steps a second the bar advances, as "120 unit/s"
// (or /min, /hr when slower), beside its count and its elapsed and
// remaining time.
func Rate(unit string) Option {
	return func(p *progressbar.ProgressBar) {
		progressbar.OptionShowIts()(p)
		progressbar.OptionSetItsString(unit)(p)
	}
}

// New returns a bar of n steps named desc on w when mode asks for one, or
// when mode is ModeAuto and w is a terminal (a Screen on one); nil means
// no bar (ModeLog, or nothing to count). It shows the count and the
// elapsed and remaining time, and what opts add. On a Screen, the lines
// written to the Screen while the bar shows go above it.
func New(w io.Writer, mode string, n int, desc string, opts ...Option) *Bar {
	if mode == ModeLog || n == 0 {
		return nil
	}
	if mode == ModeAuto && !isTerminal(w) {
		return nil
	}
	width := 30
	if s, ok := w.(*Screen); ok {
		if cols := s.width(); cols > 0 {
			width = fitWidth(cols, desc)
		}
		w = barWriter{s}
	}
	bar := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetWidth(width),
	}
	for _, o := range opts {
		bar = append(bar, progressbar.Option(o))
	}
	return &Bar{w: w, bar: progressbar.NewOptions(n, bar...)}
}

// besideBar is about how many columns a bar's line takes besides its
// description and its bar: "  52% |" before the bar, and after it
// "| (1050/2000, 120 districts/s) [10s:12s]".
const besideBar = 48

// fitWidth is the width of a bar named desc that leaves room on a
// terminal cols wide for what the bar's line shows beside it, between 6
// and 30. What is still too wide (a long name, a narrow terminal, a name
// that grows) is cut at the terminal's edge by the Screen.
func fitWidth(cols int, desc string) int {
	return min(30, max(6, cols-1-utf8.RuneCountInString(desc)-besideBar))
}

// isTerminal reports whether w is a terminal, or a Screen on one.
func isTerminal(w io.Writer) bool {
	if s, ok := w.(*Screen); ok {
		w = s.w
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Start draws the bar at once, at what it has counted, and starts the
// clock its rate and time left are measured by (else the first Add
// does: a rate over no time at all).
func (b *Bar) Start() {
	if b != nil {
		_ = b.bar.RenderBlank()
	}
}

// Describe names the step under way.
func (b *Bar) Describe(step string) {
	if b != nil {
		b.bar.Describe(step)
	}
}

// Add counts n more steps done.
func (b *Bar) Add(n int) error {
	if b == nil {
		return nil
	}
	return b.bar.Add(n)
}

// Finish fills the bar and ends its line, so that what is written after
// it starts on a line of its own.
func (b *Bar) Finish() error {
	if b == nil {
		return nil
	}
	err := b.bar.Finish()
	_, werr := fmt.Fprintln(b.w)
	return errors.Join(err, werr)
}

// Stop leaves the bar where it stands — short of its total when not every
// step was done — and ends its line, as Finish does.
func (b *Bar) Stop() error {
	if b == nil {
		return nil
	}
	err := b.bar.Exit()
	_, werr := fmt.Fprintln(b.w)
	return errors.Join(err, werr)
}

// Quiet is log as it should be while b is on show, when the bar stands
// for the routine lines (backfill's, a line per date and the lines of each
// date's write): only warnings and errors are logged. It is log itself
// when b is nil.
func (b *Bar) Quiet(log *zap.Logger) *zap.Logger {
	if b == nil {
		return log
	}
	return log.WithOptions(zap.IncreaseLevel(zap.WarnLevel))
}
