// Package progress shows how far a long command has come: a bar on a
// terminal, nothing where logs go to a file or Cloud Logging (there the
// command's log lines say it).
package progress

import (
	"errors"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Modes of display, as a --progress flag takes them.
const (
	Auto = "auto" // a bar when the output is a terminal
	Bar  = "bar"  // always a bar
	Log  = "log"  // never a bar
)

// ErrMode is CheckMode's error for a mode that is not Auto, Bar or Log.
var ErrMode = errors.New("want auto, bar or log")

// CheckMode refuses a mode that is not Auto, Bar or Log.
func CheckMode(mode string) error {
	if mode != Auto && mode != Bar && mode != Log {
		return ErrMode
	}
	return nil
}

// New returns a bar of n steps named desc on w when mode asks for one, or
// when mode is Auto and w is a terminal; nil means no bar (mode Log, or
// nothing to count).
func New(w io.Writer, mode string, n int, desc string) *progressbar.ProgressBar {
	if mode == Log || n == 0 {
		return nil
	}
	if mode == Auto {
		f, ok := w.(*os.File)
		if !ok || !term.IsTerminal(int(f.Fd())) {
			return nil
		}
	}
	return progressbar.NewOptions(n,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetWidth(30),
	)
}
