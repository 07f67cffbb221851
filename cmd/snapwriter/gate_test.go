package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/gate"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// changedJSON is genJSON of date with n districts whose district i has
// membership.total v.
func changedJSON(t *testing.T, date string, n, i int, v int64) string {
	t.Helper()
	return withTotal(t, model.Generate(date, n, 1), i, v)
}

// withTotal is s as JSON, its district i's membership.total set to v
// (unless v < 0).
func withTotal(t *testing.T, s *model.Snapshot, i int, v int64) string {
	t.Helper()
	if v >= 0 {
		data, err := s.Payload.Districts[i].Data()
		if err != nil {
			t.Fatal(err)
		}
		data["membership"].(map[string]any)["total"] = v
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// errorLines counts stderr's log lines at ERROR.
func errorLines(stderr string) int { return strings.Count(stderr, `"severity":"ERROR"`) }

// A gated write of a day with fewer districts than the day before is held:
// exit 8, the report on stdout names the rule and the district, one ERROR
// line, nothing stored. --json says the same.
func TestWriteGateHeldExit8(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	if code, _, errs := c.run(genJSON(t, "2026-11-19", 6), "write", "--input", "-", "--gate"); code != exitOK {
		t.Fatalf("first day: exit %d\n%s", code, errs)
	}
	before := snapshotDocs(t, c.project)
	code, out, errs := c.run(genJSON(t, day, 5), "write", "--input", "-", "--gate")
	if code != exitHeld {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitHeld, out, errs)
	}
	for _, want := range []string{"HELD by the publication gate — nothing written", "- district 6 (removed)",
		"held: count: 1 district of the 6 live in the newest complete snapshot 2026-11-19 is missing from the input", "districts: 6"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if n := errorLines(errs); n != 1 || !strings.Contains(errs, `"rules":["count"]`) || !strings.Contains(errs, "snapwriter diff") {
		t.Errorf("%d ERROR lines, want 1 naming the rule and diff:\n%s", n, errs)
	}
	if after := snapshotDocs(t, c.project); after != before {
		t.Error("a held write changed the database")
	}

	code, out, _ = c.run(genJSON(t, day, 5), "write", "--input", "-", "--gate", "--json")
	var res snapshot.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != exitHeld {
		t.Fatalf("exit %d, %v\n%s", code, err, out)
	}
	if res.Outcome != snapshot.OutcomeHeld || res.Gate == nil || len(res.Gate.Holds) != 1 || res.Gate.Holds[0].Rule != gate.RuleCount ||
		strings.Join(res.Gate.Holds[0].Districts, ",") != "6" || res.Gate.Baseline.SnapshotID != "2026-11-19" {
		t.Errorf("result %+v gate %+v", res, res.Gate)
	}
	// A dry run says the gate would hold it, and writes nothing.
	code, out, errs = c.run(genJSON(t, day, 5), "write", "--input", "-", "--gate", "--dry-run")
	if code != exitOK || !strings.Contains(out, "the publication gate holds it") || !strings.Contains(out, "held: count:") {
		t.Errorf("dry run: exit %d\n%s%s", code, out, errs)
	}
	if after := snapshotDocs(t, c.project); after != before {
		t.Error("a dry run changed the database")
	}
	// Without the gate the same input is written.
	if code, _, errs := c.run(genJSON(t, day, 5), "write", "--input", "-"); code != exitOK {
		t.Fatalf("ungated: exit %d\n%s", code, errs)
	}
}

// Rewriting a stored complete date with changed values holds, byte for
// byte, and prints old → new; --allow-value-changes lets it through, and
// says so.
func TestWriteGateValueRule(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	if code, _, errs := c.run(genJSON(t, day, 8), "write", "--input", "-"); code != exitOK {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	before := snapshotDocs(t, c.project)
	in := changedJSON(t, day, 8, 3, 123456)
	code, out, errs := c.run(in, "write", "--input", "-", "--gate")
	if code != exitHeld || !strings.Contains(out, "~ district 4\n") || !strings.Contains(out, "data.membership.total: ") ||
		!strings.Contains(out, "→ 123456  (counter; holds: value changed)") || !strings.Contains(out, "held: value:") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if snapshotDocs(t, c.project) != before {
		t.Error("a held write changed the database")
	}
	code, out, errs = c.run(in, "write", "--input", "-", "--gate", "--allow-value-changes")
	if code != exitOK || !strings.Contains(out, "publication gate: passed") {
		t.Fatalf("allowed: exit %d\n%s%s", code, out, errs)
	}
	if code, out, _ := c.run("", "diff", "--input", writeFile(t, "in.json", in), "--exit-code"); code != exitOK || !strings.Contains(out, "0 changed") {
		t.Errorf("after the allowed rewrite, diff: exit %d\n%s", code, out)
	}
}

// The gate's flags are checked before anything is read or written.
func TestGateFlagsUsage(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	bad := writeFile(t, "policy.json", `{"version": 1, "classes": {"counters": ["total"]}}`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"write", "--input", "-", "--allow-value-changes"}, "--allow-value-changes: only with --gate"},
		{[]string{"write", "--input", "-", "--gate", "--gate-policy", filepath.Join(t.TempDir(), "none.json")}, "--gate-policy: open"},
		{[]string{"write", "--input", "-", "--gate", "--gate-policy", bad}, "--gate-policy " + bad + ": "},
		{[]string{"backfill", "--input-dir", t.TempDir(), "--gate", "--gate-policy", bad}, "--gate-policy " + bad},
		{[]string{"diff", "--from", day}, "give one of --to"},
		{[]string{"diff", "--from", day, "--to", day, "--input", "-"}, "give one of --to"},
		{[]string{"diff", "--to", day}, "give --from"},
		{[]string{"diff", "--from", "2026-02-30", "--to", day}, "--from \"2026-02-30\""},
		{[]string{"policy", "--gate-policy", bad}, "--gate-policy"},
	} {
		code, _, errs := c.run(genJSON(t, day, 3), tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, want 2 with %q\n%s", tc.args, code, tc.want, errs)
		}
	}
	if cols := c.rootCollections(); len(cols) != 0 {
		t.Errorf("refused commands created %v", cols)
	}
}

// diff compares two stored dates, or an input with a stored date: text
// for people, --json for programs, --exit-code as git's.
func TestDiffCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, d := range []struct {
		date string
		n    int
	}{{"2026-11-19", 6}, {day, 7}} {
		if code, _, errs := c.run(genJSON(t, d.date, d.n), "write", "--input", "-"); code != exitOK {
			t.Fatalf("exit %d\n%s", code, errs)
		}
	}
	code, out, errs := c.run("", "diff", "--from", "2026-11-19", "--to", day)
	if code != exitOK || !strings.HasPrefix(out, "snapshot 2026-11-20: 7 districts in the input; 1 added, 0 removed, 6 changed, 0 unchanged") ||
		!strings.Contains(out, "+ district 7 (added)") {
		t.Errorf("exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = c.run("", "diff", "--from", "2026-11-19", "--to", day, "--json", "--exit-code")
	var rep gate.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitError {
		t.Fatalf("exit %d, want 1 (they differ), %v\n%s", code, err, out)
	}
	if rep.SnapshotID != day || rep.Compared != "2026-11-19" || strings.Join(rep.Districts.Added, ",") != "7" || len(rep.Districts.Changed) != 6 || len(rep.Changes) != 6 {
		t.Errorf("report %+v", rep)
	}
	// An input against its own date, stored: no difference, exit 0.
	code, out, _ = c.run(genJSON(t, day, 7), "diff", "--input", "-", "--exit-code")
	if code != exitOK || !strings.Contains(out, "0 added, 0 removed, 0 changed, 7 unchanged") || !strings.Contains(out, "passes") {
		t.Errorf("exit %d\n%s", code, out)
	}
	// A stored date that is not there: exit 1, saying so.
	code, _, errs = c.run("", "diff", "--from", "2026-11-01", "--to", day)
	if code != exitError || !strings.Contains(errs, "snapshot 2026-11-01 is not stored") {
		t.Errorf("exit %d\n%s", code, errs)
	}
}

// policy prints the defaults as the file --gate-policy takes, and a file
// of them is taken back unchanged.
func TestPolicyCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	code, out, errs := c.run("", "policy")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	if _, err := gate.ParsePolicy([]byte(out)); err != nil {
		t.Fatalf("the printed policy does not parse: %v\n%s", err, out)
	}
	p := writeFile(t, "p.json", out)
	if code, again, _ := c.run("", "policy", "--gate-policy", p); code != exitOK || again != out {
		t.Errorf("exit %d; the policy read back differs:\n%s", code, again)
	}
	if b, _ := os.ReadFile(p); !strings.Contains(string(b), `"counter"`) {
		t.Errorf("policy lacks the counter class:\n%s", b)
	}
}

// A gated backfill writes the dates that pass and lists the one held
// beside them: exit 8.
func TestBackfillGateHeld(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	for d, n := range map[string]int{"2026-11-18": 4, "2026-11-19": 3, "2026-11-20": 5} {
		if err := os.WriteFile(filepath.Join(dir, d+".json"), []byte(genJSON(t, d, n)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := c.run("", "backfill", "--input-dir", dir, "--gate")
	if code != exitHeld || !strings.Contains(out, "1 held") {
		t.Fatalf("exit %d, want 8\n%s%s", code, out, errs)
	}
	if n := errorLines(errs); n != 1 {
		t.Errorf("%d ERROR lines, want the held date's one:\n%s", n, errs)
	}
	st := stateOf(t, c.project)
	if st["2026-11-18"].State != "complete" || st["2026-11-20"].State != "complete" {
		t.Errorf("stored %+v", st)
	}
	if _, ok := st["2026-11-19"]; ok {
		t.Error("the held date was written")
	}
	if !strings.Contains(out, "2026-11-19  held") {
		t.Errorf("the table does not list the held date:\n%s", out)
	}
}

// closingJSON is a month-end closing input of 2026-10-31 with n districts,
// district i's membership.total set to v (unless v < 0).
func closingJSON(t *testing.T, n, i int, v int64) string {
	t.Helper()
	s := model.Generate("2026-10-31", n, 1)
	closing := true
	s.Payload.Metadata.IsClosingPeriodData = &closing
	s.Payload.Metadata.CollectionDate = "2026-11-04"
	return withTotal(t, s, i, v)
}

// A month-end closing rewrite passes when its counters move within their
// bounds, says so, and verify shows the deltas it let through; past the
// bound it is held by the closing rule.
func TestWriteGateClosingRule(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	if code, _, errs := c.run(closingJSON(t, 5, 0, -1), "write", "--input", "-"); code != exitOK {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	d, err := model.Generate("2026-10-31", 5, 1).Payload.Districts[0].Data()
	if err != nil {
		t.Fatal(err)
	}
	total := d["membership"].(map[string]any)["total"].(int64)
	bound := int64(gate.CounterBound(float64(total)))
	code, out, errs := c.run(closingJSON(t, 5, 0, total+bound), "write", "--input", "-", "--gate")
	if code != exitOK || !strings.Contains(out, "publication gate: passed by the month-end closing rule, 1 delta allowed") {
		t.Fatalf("within the bound: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = c.run("", "verify", "--date", "2026-10-31")
	if code != exitOK || !strings.Contains(out, "passed the publication gate by the month-end closing rule") ||
		!strings.Contains(out, fmt.Sprintf("district 1 data.membership.total: %d → %d (counter)", total, total+bound)) {
		t.Errorf("verify: exit %d\n%s%s", code, out, errs)
	}
	stored := total + bound
	past := stored + int64(gate.CounterBound(float64(stored))) + 1
	code, out, errs = c.run(closingJSON(t, 5, 0, past), "write", "--input", "-", "--gate")
	if code != exitHeld || !strings.Contains(out, "held: closing:") || !strings.Contains(out, "over its bound") {
		t.Errorf("past the bound: exit %d\n%s%s", code, out, errs)
	}
}
