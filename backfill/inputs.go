package backfill

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/snapwriter/snapwriter/input"
	"github.com/snapwriter/snapwriter/input/gcs"
	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/model"
)

// Input is one date's input in a backfill directory: a Snapshot JSON file
// DIR/YYYY-MM-DD.json or a per-district snapshot directory DIR/YYYY-MM-DD/,
// or the same in a Cloud Storage folder (gs://BUCKET/PREFIX/YYYY-MM-DD.json,
// gs://BUCKET/PREFIX/YYYY-MM-DD/).
type Input struct {
	Date string
	// Path is the file, directory or gs:// URL.
	Path string
	// Problem, when set, says why the entry cannot be used (a broken link,
	// a FIFO, a date that does not exist, …); such an entry is reported,
	// never skipped.
	Problem string
}

// datedName matches the entries a backfill reads: YYYY-MM-DD.json files
// and YYYY-MM-DD directories.
var datedName = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2})(\.json)?$`)

// List finds the dated inputs in dir, a local directory or a gs:// folder
// (read through l's Cloud Storage), oldest first. Symbolic links are
// followed, to files and to directories alike. Entries whose name does not
// look like a date are ignored; one that does but cannot be used is listed
// with its Problem. A date given both as a file and as a directory is
// ambiguous and refused, as is a directory that cannot be read.
func List(ctx context.Context, l *input.Loader, dir string) ([]Input, error) {
	if gcs.IsURL(dir) {
		return listStore(ctx, l, dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	byDate := map[string]Input{}
	for _, e := range entries {
		name := e.Name()
		m := datedName.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		in := Input{Date: m[1], Path: filepath.Join(dir, name)}
		in.Problem = entryProblem(in.Path, m[1], m[2] == ".json")
		if prev, dup := byDate[in.Date]; dup {
			return nil, fmt.Errorf("%s is given twice (%s and %s)", in.Date, filepath.Base(prev.Path), name)
		}
		byDate[in.Date] = in
	}
	return sorted(byDate), nil
}

// sorted is the inputs of byDate, oldest first.
func sorted(byDate map[string]Input) []Input {
	out := make([]Input, 0, len(byDate))
	for _, in := range byDate {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Date < out[j].Date })
	return out
}

// listStore lists the dated inputs in the gs:// folder dir: the objects
// YYYY-MM-DD.json and the folders YYYY-MM-DD/ directly under it.
func listStore(ctx context.Context, l *input.Loader, dir string) ([]Input, error) {
	u, err := gcs.ParseURL(dir)
	if err != nil {
		return nil, err
	}
	store, err := l.Store(ctx)
	if err != nil {
		return nil, err
	}
	entries, err := store.List(ctx, u)
	if err != nil {
		return nil, err
	}
	byDate := map[string]Input{}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name, "/")
		m := datedName.FindStringSubmatch(name)
		// A folder named like a file, or an object named like a folder
		// (no .json), is not an input.
		if m == nil || (m[2] == ".json") == strings.HasSuffix(e.Name, "/") {
			continue
		}
		in := Input{Date: m[1], Path: e.URL.String()}
		if !model.ValidDate(m[1]) {
			in.Problem = fmt.Sprintf("%s is not a real date", m[1])
		}
		if prev, dup := byDate[in.Date]; dup {
			return nil, fmt.Errorf("%s is given twice (%s and %s)", in.Date, prev.Path, in.Path)
		}
		byDate[in.Date] = in
	}
	return sorted(byDate), nil
}

// entryProblem says why the dated entry at path cannot be used, or "" when
// it can: a .json name must be a regular file, a bare date a directory,
// after following symbolic links.
func entryProblem(path, date string, isFile bool) string {
	if !model.ValidDate(date) {
		return fmt.Sprintf("%s is not a real date", date)
	}
	fi, err := os.Stat(path)
	if err != nil {
		if li, lerr := os.Lstat(path); lerr == nil && li.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(path)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Sprintf("broken symbolic link to %s", target)
			}
			return fmt.Sprintf("symbolic link to %s cannot be followed: %v", target, unwrapPath(err))
		}
		return fmt.Sprintf("cannot be read: %v", unwrapPath(err))
	}
	kind := describeMode(fi.Mode())
	if li, err := os.Lstat(path); err == nil && li.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(path)
		kind = fmt.Sprintf("a symbolic link to %s, %s", target, kind)
	}
	switch {
	case isFile && !fi.Mode().IsRegular():
		return fmt.Sprintf("is %s; a snapshot file YYYY-MM-DD.json must be a regular file (a snapshot directory is named YYYY-MM-DD)", kind)
	case !isFile && !fi.IsDir():
		return fmt.Sprintf("is %s; a snapshot directory YYYY-MM-DD must be a directory (a snapshot file is named YYYY-MM-DD.json)", kind)
	}
	return ""
}

// describeMode names a file's type for a message.
func describeMode(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file (" + m.Type().String() + ")"
}

// unwrapPath drops the *fs.PathError's repetition of the path the message
// already names.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ShardOf is the task that writes date when count tasks share a backfill:
// the date's day number modulo count, or -1 when date is not a date. It
// depends on the date alone, not on which files a task happens to see, so
// no date goes to two tasks and none is skipped; consecutive dates spread
// evenly over the tasks.
func ShardOf(date string, count int) int {
	t, err := time.Parse(time.DateOnly, date)
	if err != nil {
		return -1
	}
	day := t.Unix() / 86400
	return int(((day % int64(count)) + int64(count)) % int64(count))
}

// Shard is one task's share of a backfill that Count tasks split, as Cloud
// Run job tasks do.
type Shard struct {
	Index int // 0 <= Index < Count
	Count int
}

// Owns reports whether the task writes date. A name that is no real date
// belongs to every task, so that every task reports it.
func (s Shard) Owns(date string) bool {
	shard := ShardOf(date, s.Count)
	return shard == s.Index || shard < 0
}

// Select returns the inputs dated from..to (inclusive; "" leaves that end
// open) that shard owns, in their order.
func Select(inputs []Input, from, to string, shard Shard) []Input {
	var mine []Input
	for _, in := range inputs {
		if (from == "" || in.Date >= from) && (to == "" || in.Date <= to) && shard.Owns(in.Date) {
			mine = append(mine, in)
		}
	}
	return mine
}

// UnusableError lists the inputs of a backfill that cannot be used: entries
// that are no usable file or directory and inputs that are invalid. It
// matches model.ErrInvalid.
type UnusableError struct {
	// Problems has one line per unusable input, its path first.
	Problems []string
	// Checked counts the inputs that were checked.
	Checked int
}

// Error counts the unusable inputs and lists them, one per line.
func (e *UnusableError) Error() string {
	return fmt.Sprintf("%d of %s cannot be used:\n  %s", len(e.Problems), plural.N(e.Checked, "dated input"), strings.Join(e.Problems, "\n  "))
}

// Unwrap makes the error match model.ErrInvalid.
func (e *UnusableError) Unwrap() error { return model.ErrInvalid }

// Check reads, through l, and validates every input that is not already
// complete (a date in complete), so that a bad one stops a backfill before
// its first write rather than halfway through. It returns an
// *UnusableError listing every input that cannot be used, or the first
// error that is not about the input itself. An input that is not ready
// (model.ErrNotReady, an upload in progress) is no reason to stop: Run
// reports it as NotReady and writes the others.
func Check(ctx context.Context, l *input.Loader, inputs []Input, complete map[string]string) error {
	var bad []string
	checked := 0
	for _, in := range inputs {
		if _, done := complete[in.Date]; done {
			continue
		}
		checked++
		if in.Problem != "" {
			bad = append(bad, in.Path+": "+in.Problem)
			continue
		}
		snap, err := loaderOf(l).LoadDated(ctx, in.Path, in.Date)
		if errors.Is(err, model.ErrNotReady) {
			continue
		}
		if err != nil {
			if !errors.Is(err, model.ErrInvalid) {
				return err
			}
			bad = append(bad, strings.ReplaceAll(err.Error(), "\n", "\n    "))
			continue
		}
		snap.Close()
	}
	if len(bad) == 0 {
		return nil
	}
	return &UnusableError{Problems: bad, Checked: checked}
}
