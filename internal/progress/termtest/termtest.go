// Package termtest renders, for tests, what a terminal shows after a
// program's output: the progress bar redraws its line with carriage
// returns and erases it with ESC [K, and what a person sees is not the
// bytes written.
package termtest

import (
	"fmt"
	"strings"
)

// Render is what a terminal shows after out: carriage returns, the
// erasing of a line (ESC [K) and newlines followed, trailing spaces and
// trailing empty lines trimmed. Any other escape sequence is shown as its
// characters and reported in err (the first of them), for a test that
// allows none to fail on it; lines is complete either way.
func Render(out string) (lines []string, err error) { return RenderCols(out, 0) }

// RenderCols is Render on a terminal cols characters wide (0: unbounded),
// which wraps a line at its width, as terminals do: a carriage return
// then goes back to the start of the last row only, and a bar redrawn
// with carriage returns leaves its wrapped rows behind.
func RenderCols(out string, cols int) (lines []string, err error) {
	screen := [][]rune{nil}
	col := 0
	rs := []rune(out)
	for i := 0; i < len(rs); i++ {
		cur := &screen[len(screen)-1]
		switch r := rs[i]; {
		case r == '\r':
			col = 0
		case r == '\n':
			screen = append(screen, nil)
			col = 0
		case r == '\x1b' && i+2 < len(rs) && rs[i+1] == '[' && rs[i+2] == 'K':
			*cur = (*cur)[:min(col, len(*cur))]
			i += 2
		default:
			if r == '\x1b' && err == nil {
				err = fmt.Errorf("an escape sequence other than ESC [K at %d: %q", i, string(rs[i:min(i+8, len(rs))]))
			}
			if cols > 0 && col == cols {
				screen = append(screen, nil)
				cur, col = &screen[len(screen)-1], 0
			}
			for len(*cur) <= col {
				*cur = append(*cur, ' ')
			}
			(*cur)[col] = r
			col++
		}
	}
	for _, l := range screen {
		lines = append(lines, strings.TrimRight(string(l), " "))
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines, err
}
