package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/model"
)

// dates returns n consecutive dates from first.
func dates(first string, n int) []string {
	t, _ := time.Parse(time.DateOnly, first)
	out := make([]string, n)
	for i := range out {
		out[i] = t.AddDate(0, 0, i).Format(time.DateOnly)
	}
	return out
}

// inputDir writes one generated snapshot per date into a fresh directory.
func inputDir(t *testing.T, ds ...string) string {
	t.Helper()
	dir := t.TempDir()
	for i, d := range ds {
		writeSnapshot(t, filepath.Join(dir, d+".json"), d, int64(i+1))
	}
	return dir
}

func writeSnapshot(t *testing.T, path, date string, seed int64) {
	t.Helper()
	b, err := json.Marshal(model.Generate(date, 3, seed))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestShardOf(t *testing.T) {
	t.Parallel()
	// Across a month, a year and a leap day.
	for _, first := range []string{"2026-11-20", "2023-12-17", "2024-02-15"} {
		for count := 1; count <= 7; count++ {
			sizes := make([]int, count)
			for _, d := range dates(first, 30) {
				s := ShardOf(d, count)
				if s < 0 || s >= count {
					t.Fatalf("ShardOf(%s, %d) = %d", d, count, s)
				}
				sizes[s]++
			}
			for i, n := range sizes {
				if n < 30/count || n > 30/count+1 {
					t.Errorf("from %s over %d tasks: task %d gets %d dates (%v)", first, count, i, n, sizes)
				}
			}
		}
	}
	// Deterministic and independent of the other dates.
	// Pinned values: a change would reshuffle running backfills' shares.
	for date, want := range map[string]int{"1970-01-01": 0, "1970-01-05": 0, "2026-11-20": 1, "2026-11-21": 2, "2026-02-30": -1} {
		if got := ShardOf(date, 4); got != want {
			t.Errorf("ShardOf(%s, 4) = %d, want %d", date, got, want)
		}
	}
}

// Select keeps the dates within from..to that the shard owns, and a name
// that is no real date in every shard.
func TestSelect(t *testing.T) {
	t.Parallel()
	var in []Input
	for _, d := range append(dates("2026-11-18", 6), "2026-11-31") {
		in = append(in, Input{Date: d})
	}
	got := func(s []Input) string {
		var ds []string
		for _, i := range s {
			ds = append(ds, i.Date)
		}
		return strings.Join(ds, " ")
	}
	for _, c := range []struct {
		from, to string
		shard    Shard
		want     string
	}{
		{"", "", Shard{0, 1}, "2026-11-18 2026-11-19 2026-11-20 2026-11-21 2026-11-22 2026-11-23 2026-11-31"},
		{"2026-11-19", "2026-11-21", Shard{0, 1}, "2026-11-19 2026-11-20 2026-11-21"},
		{"2026-11-22", "", Shard{0, 1}, "2026-11-22 2026-11-23 2026-11-31"},
		{"", "", Shard{1, 4}, "2026-11-20 2026-11-31"},
		{"", "", Shard{3, 4}, "2026-11-18 2026-11-22 2026-11-31"},
		{"2026-11-19", "2026-11-30", Shard{3, 4}, "2026-11-22"},
	} {
		if g := got(Select(in, c.from, c.to, c.shard)); g != c.want {
			t.Errorf("Select(%q..%q, %+v) = %s, want %s", c.from, c.to, c.shard, g, c.want)
		}
	}
}

// List finds dated files and directories, oldest first, follows symbolic
// links, ignores undated names, and names what is wrong with an unusable
// entry.
func TestList(t *testing.T) {
	t.Parallel()
	root := inputDir(t, "2026-11-02", "2026-11-01")
	elsewhere := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(root, "2026-11-03"), 0o755))
	writeSnapshot(t, filepath.Join(elsewhere, "x.json"), "2026-11-04", 1)
	must(os.Symlink(filepath.Join(elsewhere, "x.json"), filepath.Join(root, "2026-11-04.json")))
	must(os.Symlink(filepath.Join(root, "gone"), filepath.Join(root, "2026-11-10")))
	must(os.Symlink(filepath.Join(root, "2026-11-01.json"), filepath.Join(root, "2026-11-12")))
	must(os.Symlink(filepath.Join(root, "2026-11-13.json"), filepath.Join(root, "2026-11-13.json")))
	must(syscall.Mkfifo(filepath.Join(root, "2026-11-14.json"), 0o600))
	must(os.Mkdir(filepath.Join(root, "2026-11-15.json"), 0o755))
	must(os.WriteFile(filepath.Join(root, "2026-11-16"), nil, 0o600))
	must(os.WriteFile(filepath.Join(root, "2026-02-30.json"), nil, 0o600))
	must(os.WriteFile(filepath.Join(root, "notes.txt"), nil, 0o600))
	must(os.WriteFile(filepath.Join(root, "2026-11-20.json.bak"), nil, 0o600))

	got, err := List(context.Background(), nil, root)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, in := range got {
		if in.Path != filepath.Join(root, filepath.Base(in.Path)) || !strings.HasPrefix(filepath.Base(in.Path), in.Date) {
			t.Errorf("%s: path %s", in.Date, in.Path)
		}
		lines = append(lines, fmt.Sprintf("%s %s", in.Date, in.Problem))
	}
	want := []string{
		"2026-02-30 2026-02-30 is not a real date",
		"2026-11-01 ",
		"2026-11-02 ",
		"2026-11-03 ",
		"2026-11-04 ",
		"2026-11-10 broken symbolic link to " + filepath.Join(root, "gone"),
		"2026-11-12 is a symbolic link to " + filepath.Join(root, "2026-11-01.json") + ", a regular file; a snapshot directory YYYY-MM-DD must be a directory (a snapshot file is named YYYY-MM-DD.json)",
		"2026-11-13 symbolic link to " + filepath.Join(root, "2026-11-13.json") + " cannot be followed: too many levels of symbolic links",
		"2026-11-14 is a named pipe (FIFO); a snapshot file YYYY-MM-DD.json must be a regular file (a snapshot directory is named YYYY-MM-DD)",
		"2026-11-15 is a directory; a snapshot file YYYY-MM-DD.json must be a regular file (a snapshot directory is named YYYY-MM-DD)",
		"2026-11-16 is a regular file; a snapshot directory YYYY-MM-DD must be a directory (a snapshot file is named YYYY-MM-DD.json)",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("List:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	writeSnapshot(t, filepath.Join(root, "2026-11-03.json"), "2026-11-03", 1)
	if _, err := List(context.Background(), nil, root); err == nil || err.Error() != "2026-11-03 is given twice (2026-11-03 and 2026-11-03.json)" {
		t.Errorf("a date given twice: %v", err)
	}
	if _, err := List(context.Background(), nil, filepath.Join(root, "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing directory: %v", err)
	}
}

// Check reports every unusable input at once, leaves complete dates
// unread, and matches model.ErrInvalid.
func TestCheck(t *testing.T) {
	t.Parallel()
	dir := inputDir(t, "2026-11-01", "2026-11-02")
	writeSnapshot(t, filepath.Join(dir, "2026-11-03.json"), "2026-11-02", 1) // dated otherwise
	if err := os.WriteFile(filepath.Join(dir, "2026-11-04.json"), []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := List(context.Background(), nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	in = append(in, Input{Date: "2026-11-05", Path: filepath.Join(dir, "2026-11-05"), Problem: "broken symbolic link to x"})

	if err := Check(context.Background(), nil, in[:2], nil); err != nil {
		t.Errorf("good inputs: %v", err)
	}
	err = Check(context.Background(), nil, in, map[string]string{"2026-11-04": "000000000000001"})
	var ue *UnusableError
	if !errors.As(err, &ue) || !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("Check: %v", err)
	}
	if ue.Checked != 4 || len(ue.Problems) != 2 ||
		ue.Problems[0] != "invalid snapshot input: "+filepath.Join(dir, "2026-11-03.json")+": payload.metadata.dataAsOfDate is 2026-11-02, the name says 2026-11-03" ||
		ue.Problems[1] != filepath.Join(dir, "2026-11-05")+": broken symbolic link to x" {
		t.Errorf("problems of %d checked:\n%s", ue.Checked, strings.Join(ue.Problems, "\n"))
	}
	if !strings.HasPrefix(err.Error(), "2 of 4 dated inputs cannot be used:\n  ") {
		t.Errorf("message: %v", err)
	}
	// The broken file of a complete date was not read; unread, it counts.
	if err := Check(context.Background(), nil, in[3:4], nil); !errors.As(err, &ue) || !strings.Contains(ue.Problems[0], "2026-11-04.json") {
		t.Errorf("a broken file: %v", err)
	}
}

func TestResolveDate(t *testing.T) {
	now := time.Date(2026, 3, 1, 5, 0, 0, 0, time.UTC)
	for in, want := range map[string]string{
		"today": "2026-03-01", "today-0": "2026-03-01", "today-1": "2026-02-28", "today-365": "2025-03-01",
		"2026-01-05": "2026-01-05", "today-x": "today-x", "today-01": "today-01", "today+1": "today+1", "yesterday": "yesterday",
		"today--1": "today--1",
	} {
		if got := ResolveDate(in, now); got != want {
			t.Errorf("ResolveDate(%q) = %q, want %q", in, got, want)
		}
	}
}
