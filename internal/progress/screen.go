package progress

import (
	"bytes"
	"io"
	"os"
	"sync"
	"unicode/utf8"

	"golang.org/x/term"
)

// clearLine takes the cursor to the start of its line and erases the
// line: the bar, before a line is written where it was.
const clearLine = "\r\x1b[K"

// Screen is an output — stderr — that a bar and lines of text (log
// lines, messages) share: a line written while a bar shows goes above the
// bar, which is erased first and drawn again under the line, so that
// neither overwrites the other. New draws a bar given a Screen this way.
// A Screen serialises the writes to it, the bar's among them, so that a
// logger and a bar's goroutine may write at once.
type Screen struct {
	mu sync.Mutex
	w  io.Writer
	// bar is the bar's last drawing while it is on show (nil when none
	// is): what is drawn again under a line.
	bar []byte
	// onScreen: the bar is drawn on the last line, to be erased before a
	// line is written there.
	onScreen bool
	// midLine: the last text written did not end its line; the bar waits
	// until it does, so as not to be drawn into the middle of it.
	midLine bool
	// cols is the terminal's width now, 0 when unknown (not a terminal);
	// nil counts as 0.
	cols func() int
}

// width is the terminal's width now, 0 when unknown.
func (s *Screen) width() int {
	if s.cols == nil {
		return 0
	}
	return s.cols()
}

// NewScreen returns the Screen writing to w.
func NewScreen(w io.Writer) *Screen { return &Screen{w: w, cols: termCols(w)} }

// termCols returns the width of w's terminal, asked at each call so that
// a resized window is followed, or 0 when w is not a terminal.
func termCols(w io.Writer) func() int {
	f, ok := w.(*os.File)
	if !ok {
		return func() int { return 0 }
	}
	return func() int {
		cols, _, err := term.GetSize(int(f.Fd()))
		if err != nil {
			return 0
		}
		return cols
	}
}

// Write writes p, a line or part of one, above the bar when one shows.
func (s *Screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onScreen {
		if _, err := io.WriteString(s.w, clearLine); err != nil {
			return 0, err
		}
		s.onScreen = false
	}
	n, err := s.w.Write(p)
	if len(p) > 0 {
		s.midLine = p[len(p)-1] != '\n'
	}
	if err == nil && s.bar != nil && !s.midLine {
		if _, err := s.w.Write(s.bar); err == nil {
			s.onScreen = true
		}
	}
	return n, err
}

// barWriter is the bar's side of a Screen: what it draws is kept, to be
// drawn again under the next line, and written unless a line is half
// written; the newline that ends the bar's line (Finish, Stop) ends its
// show.
type barWriter struct{ s *Screen }

func (b barWriter) Write(p []byte) (int, error) {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	if cols := s.width(); cols > 1 {
		// A drawing wider than the terminal would wrap, and the carriage
		// return that starts the next one goes back to the start of its
		// last row only: every redraw would leave a row behind. The last
		// column stays free too, where some terminals wrap already.
		p = fit(p, cols-1)
	}
	switch {
	case bytes.HasSuffix(p, []byte("\n")):
		s.bar = nil
	case len(bytes.Trim(p, " \r")) > 0:
		// A drawing, not only the erasing of one (spaces, returns).
		s.bar = append(s.bar[:0], p...)
	}
	if s.midLine {
		// Drawn after the line ends (Write), from s.bar.
		return n, nil
	}
	if _, err := s.w.Write(p); err != nil {
		return 0, err
	}
	s.onScreen = s.bar != nil
	return n, nil
}

// fit cuts each run of p between carriage returns and newlines to at most
// cols characters. A bar's drawing is plain text: no escape sequences,
// one column a character.
func fit(p []byte, cols int) []byte {
	out := make([]byte, 0, len(p))
	run := 0
	for len(p) > 0 {
		r, size := utf8.DecodeRune(p)
		switch {
		case r == '\r' || r == '\n':
			run = 0
		case run == cols:
			p = p[size:]
			continue
		default:
			run++
		}
		out = append(out, p[:size]...)
		p = p[size:]
	}
	return out
}
