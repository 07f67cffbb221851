package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/snapwriter/snapwriter/model"
)

// runCounting runs snapwriter in process as c.run does, and also reports
// how many Firestore clients the command opened.
func (c *cli) runCounting(stdin string, args ...string) (code int, stderr string, dials int) {
	c.t.Helper()
	code, _, stderr = c.runDialing(stdin, func() { dials++ }, args...)
	return code, stderr, dials
}

// rootCollections lists the project's top-level collections: a command
// that refused its input must not have created one (locks and
// fence_counters included).
func (c *cli) rootCollections() []string {
	c.t.Helper()
	refs, err := c.client().Collections(context.Background()).GetAll()
	if err != nil {
		c.t.Fatal(err)
	}
	var ids []string
	for _, r := range refs {
		ids = append(ids, r.ID)
	}
	return ids
}

// Issue 15: each of these inputs or flags is refused with exit 2 and a
// message naming the problem before any I/O: no Firestore client opened,
// no document written and no collection created.
func TestInvalidInputRefusedBeforeAnyIO(t *testing.T) {
	t.Parallel()
	good := genJSON(t, day, 5)
	firstID := regexp.MustCompile(`"districtId":"(\w+)"`)
	replaceOnce := func(s, old, new string) string {
		t.Helper()
		if !strings.Contains(s, old) {
			t.Fatalf("generated input lacks %q", old)
		}
		return strings.Replace(s, old, new, 1)
	}
	dupDistrictID := firstID.ReplaceAllStringFunc(good, func() func(string) string {
		done := false
		return func(m string) string {
			if done {
				return m
			}
			done = true
			return m + `,"districtId":"99"`
		}
	}())
	dupRanking := replaceOnce(good, `"rankings":{"metadata":{`, `"rankings":{"metadata":{"rankingVersion":"x",`)
	surrogate := replaceOnce(good, `"districts":[{`, `"districts":[{"note":"\ud800",`)
	lowSurrogate := replaceOnce(good, `"districts":[{`, `"districts":[{"note":"ok \udc00 then",`)
	oversizeRoot := edit(t, good, func(m map[string]any) { m["blob"] = strings.Repeat("x", 2<<20) })
	// JSON has no NaN nor infinity; a number too large for a double is the
	// nearest an input comes to one, and must not reach storage as one.
	hugeNumber := replaceOnce(good, `"districts":[{`, `"districts":[{"peak":[1,-1e400],`)

	dir := t.TempDir()
	bomFile := filepath.Join(dir, "bom.json")
	if err := os.WriteFile(bomFile, []byte("\xEF\xBB\xBF"+good), 0o600); err != nil {
		t.Fatal(err)
	}
	bomDir := snapshotDir(t, filepath.Join(dir, "bomdir"), day, 3)
	district, err := os.ReadFile(filepath.Join(bomDir, "district_1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bomDir, "district_1.json"), append([]byte("\xFF\xFE"), district...), 0o600); err != nil {
		t.Fatal(err)
	}
	backfillDir := inputDir(t, []string{day}, 3)

	checkUsage(t, []usageCase{
		{"duplicate district id", dupDistrictID, []string{"write", "--input", "-"}, nil,
			`$.payload.districts[0].districtId: duplicate key "districtId"`},
		{"duplicate key in rankings", dupRanking, []string{"write", "--input", "-"}, nil,
			`$.rankings.metadata.rankingVersion: duplicate key "rankingVersion"`},
		{"duplicate top-level key", `{"status":"partial",` + good[1:], []string{"write", "--input", "-"}, nil,
			`$.status: duplicate key "status"`},
		{"lone high surrogate", surrogate, []string{"write", "--input", "-"}, nil,
			`$.payload.districts[0].note: invalid surrogate \ud800`},
		{"lone low surrogate", lowSurrogate, []string{"write", "--input", "-"}, nil,
			`$.payload.districts[0].note: invalid surrogate \udc00`},
		{"--date disagrees with dataAsOfDate", good, []string{"write", "--input", "-", "--date", "2026-11-21"}, nil,
			"--date is 2026-11-21 but the input's $.payload.metadata.dataAsOfDate is 2026-11-20"},
		{"repair --date disagrees with dataAsOfDate", good, []string{"repair", "--input", "-", "--date", "2026-11-19"}, nil,
			"--date is 2026-11-19 but the input's $.payload.metadata.dataAsOfDate is 2026-11-20"},
		{"reserved collection: write", good, []string{"write", "--input", "-", "--collection", "__x__"}, nil,
			`--collection "__x__": reserved collection name`},
		{"reserved collection: get", "", []string{"get", "--date", day, "--collection", "__snapshots__"}, nil,
			`--collection "__snapshots__": reserved collection name`},
		{"reserved collection: list", "", []string{"list", "--collection", "__x__"}, nil, "reserved collection name"},
		{"reserved collection: repair", good, []string{"repair", "--date", day, "--input", "-", "--collection", "__x__"}, nil, "reserved collection name"},
		{"reserved collection: backfill", "", []string{"backfill", "--input-dir", backfillDir, "--collection", "__x__"}, nil, "reserved collection name"},
		{"reserved collection from the environment", good, []string{"write", "--input", "-"}, map[string]string{"SNAPWRITER_COLLECTION": "__x__"},
			`SNAPWRITER_COLLECTION=__x__: reserved collection name`},
		{"collection .", good, []string{"write", "--input", "-", "--collection", "."}, nil, `"." and ".." are not collection ids`},
		{"collection ..", "", []string{"list", "--collection", ".."}, nil, `"." and ".." are not collection ids`},
		{"collection with /", "", []string{"list", "--collection", "a/b"}, nil, `contains "/"`},
		{"empty collection", "", []string{"list", "--collection", ""}, nil, "it is empty"},
		{"collection over 1500 bytes", "", []string{"list", "--collection", strings.Repeat("c", 1501)}, nil,
			"--collection (1501 bytes): invalid collection name: 1501 bytes, over Firestore's 1500"},
		{"get --district ../x", "", []string{"get", "--date", day, "--district", "../x"}, nil, `--district "../x": invalid district id`},
		{"get --district with a slash", "", []string{"get", "--date", day, "--district", "4/2"}, nil, "invalid district id"},
		{"get --district empty", "", []string{"get", "--date", day, "--district", ""}, nil, "invalid district id"},
		{"byte-order mark on stdin", "\xEF\xBB\xBF" + good, []string{"write", "--input", "-"}, nil,
			"stdin: invalid snapshot: $: file starts with a byte-order mark (UTF-8, EF BB BF)"},
		{"byte-order mark in a file", "", []string{"write", "--input", bomFile}, nil,
			bomFile + ": invalid snapshot: $: file starts with a byte-order mark (UTF-8, EF BB BF)"},
		{"UTF-16 byte-order mark in a snapshot directory", "", []string{"write", "--input", bomDir}, nil,
			"district_1.json: $: file starts with a byte-order mark (UTF-16 little-endian, FF FE)"},
		{"number beyond a double: write", hugeNumber, []string{"write", "--input", "-"}, nil,
			"$.payload.districts[0].peak[1]: number -1e400 is outside the range of a double"},
		{"number beyond a double: repair", hugeNumber, []string{"repair", "--date", day, "--input", "-"}, nil,
			"$.payload.districts[0].peak[1]: number -1e400 is outside the range of a double"},
		{"number beyond a double: verify --input", hugeNumber, []string{"verify", "--date", day, "--input", "-"}, nil,
			"$.payload.districts[0].peak[1]: number -1e400 is outside the range of a double"},
		{"oversize root blames the unknown field", oversizeRoot, []string{"write", "--input", "-"}, nil,
			"its largest fields: inputExtra.snapshot.blob (from $.blob) 2097158 bytes, metadata"},
	})
}

// A usageCase runs the CLI with args (and stdin, env) and expects it to
// refuse them: exit 2, a message that says want, and nothing touched.
type usageCase struct {
	name  string
	stdin string
	args  []string
	env   map[string]string
	want  string
}

// checkUsage runs each case in a CLI of its own: exit 2, its message, no
// Firestore client opened, no document written, no collection created.
func checkUsage(t *testing.T, cases []usageCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			for k, v := range tc.env {
				c.env[k] = v
			}
			code, errs, dials := c.runCounting(tc.stdin, tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want 2\n%s", code, errs)
			}
			if !strings.Contains(errs, tc.want) {
				t.Errorf("message does not say %q:\n%s", tc.want, errs)
			}
			if dials != 0 {
				t.Errorf("opened %d Firestore clients before refusing", dials)
			}
			if n := c.docCount(); n != 0 {
				t.Errorf("%d documents written", n)
			}
			if colls := c.rootCollections(); len(colls) != 0 {
				t.Errorf("collections created: %v", colls)
			}
		})
	}
}

// The same input is accepted under its own date and with a --date that
// agrees, and an input without a dataAsOfDate takes --date.
func TestWriteDateAgreesWithInput(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	if code, _, errs := c.run(genJSON(t, day, 3), "write", "--input", "-", "--date", day); code != exitOK {
		t.Fatalf("--date equal to dataAsOfDate: exit %d\n%s", code, errs)
	}
	undated := edit(t, genJSON(t, "2026-11-22", 3), func(m map[string]any) {
		delete(m["payload"].(map[string]any)["metadata"].(map[string]any), "dataAsOfDate")
	})
	// Without --date it has no id: exit 2, and the CLI names the flag
	// that gives one (the library's message names none).
	if code, _, errs := c.run(undated, "write", "--input", "-"); code != exitUsage ||
		!strings.Contains(errs, "dataAsOfDate: missing, and no snapshot id was given\n  (give the snapshot's date with --date)") {
		t.Errorf("input without dataAsOfDate, no --date: exit %d, want 2\n%s", code, errs)
	}
	if code, _, errs := c.run(undated, "write", "--input", "-", "--date", "2026-11-22"); code != exitOK {
		t.Fatalf("input without dataAsOfDate: exit %d\n%s", code, errs)
	}
	if st := stateOf(t, c.project); st[day].State != "complete" || st["2026-11-22"].State != "complete" {
		t.Errorf("stored: %+v", st)
	}
}

// snapshotDir writes a per-district snapshot directory of n districts for
// date at dir, as the TypeScript application stores one.
func snapshotDir(t *testing.T, dir, date string, n int) string {
	t.Helper()
	src := model.Generate(date, n, 9)
	files := map[string]any{"metadata.json": map[string]any{
		"snapshotId": "dir-snapshot", "createdAt": src.CreatedAt, "schemaVersion": "1.0.0",
		"calculationVersion": "2.1.0", "status": "success", "errors": []any{},
		"processingDuration": int64(5), "source": "dashboard", "dataAsOfDate": date,
	}}
	var entries []any
	for _, d := range src.Payload.Districts {
		name := "district_" + d.DistrictID + ".json"
		files[name] = map[string]any{"districtId": d.DistrictID, "districtName": "District " + d.DistrictID, "status": "success", "data": memData(d)}
		entries = append(entries, map[string]any{"districtId": d.DistrictID, "fileName": name, "status": "success"})
	}
	files["manifest.json"] = map[string]any{"districts": entries}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(mustJSON(t, v)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Symbolic links under --input-dir are followed, to snapshot directories as
// to files.
func TestBackfillFollowsSymlinks(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	elsewhere := t.TempDir()
	root := inputDir(t, []string{"2026-11-20"}, 5)
	snapshotDir(t, filepath.Join(elsewhere, "export-21"), "2026-11-21", 4)
	if err := os.Symlink(filepath.Join(elsewhere, "export-21"), filepath.Join(root, "2026-11-21")); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, "export-22.json", genJSON(t, "2026-11-22", 3))
	if err := os.Symlink(file, filepath.Join(root, "2026-11-22.json")); err != nil {
		t.Fatal(err)
	}
	code, out, errs := c.run("", "backfill", "--input-dir", root, "--json")
	var s backfillSummary
	if code != exitOK || json.Unmarshal([]byte(out), &s) != nil || s.Complete != 3 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	st := stateOf(t, c.project)
	for date, n := range map[string]int{"2026-11-20": 5, "2026-11-21": 4, "2026-11-22": 3} {
		if st[date].State != "complete" || st[date].Districts != n {
			t.Errorf("%s: %+v, want complete with %d districts", date, st[date], n)
		}
	}
}

// A dated entry that cannot be used is reported with its path and why, and
// counted; the backfill exits 2 and writes nothing, good dates included.
func TestBackfillReportsUnusableEntries(t *testing.T) {
	t.Parallel()
	root := inputDir(t, dates("2026-11-01", 3), 3)
	link := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	link(filepath.Join(root, "gone"), "2026-11-10")                 // broken link to a directory name
	link(filepath.Join(root, "gone.json"), "2026-11-11.json")       // broken link to a file name
	link(filepath.Join(root, "2026-11-01.json"), "2026-11-12")      // a file where a directory belongs
	link(filepath.Join(root, "2026-11-13.json"), "2026-11-13.json") // a link to itself
	if err := syscall.Mkfifo(filepath.Join(root, "2026-11-14.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "2026-11-15.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "2026-02-30.json"), []byte(genJSON(t, "2026-02-28", 3)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("ignored"), 0o600); err != nil {
		t.Fatal(err)
	}

	c := newCLI(t)
	code, out, errs := c.run("", "backfill", "--input-dir", root, "--json")
	if code != exitUsage {
		t.Errorf("exit %d, want 2\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{
		"backfill: 7 of 10 dated inputs cannot be used; nothing was written",
		filepath.Join(root, "2026-11-10") + ": broken symbolic link to " + filepath.Join(root, "gone"),
		filepath.Join(root, "2026-11-11.json") + ": broken symbolic link to " + filepath.Join(root, "gone.json"),
		filepath.Join(root, "2026-11-12") + ": is a symbolic link to " + filepath.Join(root, "2026-11-01.json") + ", a regular file; a snapshot directory YYYY-MM-DD must be a directory",
		filepath.Join(root, "2026-11-13.json") + ": symbolic link to " + filepath.Join(root, "2026-11-13.json") + " cannot be followed: too many levels of symbolic links",
		filepath.Join(root, "2026-11-14.json") + ": is a named pipe (FIFO); a snapshot file YYYY-MM-DD.json must be a regular file",
		filepath.Join(root, "2026-11-15.json") + ": is a directory; a snapshot file YYYY-MM-DD.json must be a regular file",
		filepath.Join(root, "2026-02-30.json") + ": 2026-02-30 is not a real date",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if strings.Contains(errs, "notes.txt") {
		t.Errorf("an entry that is not dated was reported:\n%s", errs)
	}
	if n := c.docCount(); n != 0 {
		t.Errorf("%d documents written", n)
	}
	// Outside --from/--to, or another task's, an unusable date is not this
	// task's to report: the good dates are written.
	code, out, errs = c.run("", "backfill", "--input-dir", root, "--from", "2026-11-01", "--to", "2026-11-03")
	if code != exitOK {
		t.Errorf("--from/--to around the good dates: exit %d\n%s\n%s", code, out, errs)
	}
}
