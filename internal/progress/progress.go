// Package progress shows how far a long command has come: a bar on a
// terminal, nothing where logs go to a file or Cloud Logging (there the
// command's log lines say it).
package progress

import (
	"errors"
	"fmt"
	"io"
	"os"

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

// New returns a bar of n steps named desc on w when mode asks for one, or
// when mode is ModeAuto and w is a terminal; nil means no bar (ModeLog, or
// nothing to count).
func New(w io.Writer, mode string, n int, desc string) *Bar {
	if mode == ModeLog || n == 0 {
		return nil
	}
	if mode == ModeAuto {
		f, ok := w.(*os.File)
		if !ok || !term.IsTerminal(int(f.Fd())) {
			return nil
		}
	}
	return &Bar{w: w, bar: progressbar.NewOptions(n,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetWidth(30),
	)}
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

// Quiet is log as it should be while b is on show: routine lines would
// tear the bar apart, so only warnings and errors are logged. It is log
// itself when b is nil.
func (b *Bar) Quiet(log *zap.Logger) *zap.Logger {
	if b == nil {
		return log
	}
	return log.WithOptions(zap.IncreaseLevel(zap.WarnLevel))
}
