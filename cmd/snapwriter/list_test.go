package main

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/locking/pglock"
	"github.com/snapwriter/snapwriter/snapshot"
)

// abandon makes the root of date look as a writer killed mid-write leaves
// it: status "partial", writeState "writing", not complete, under the
// writer's fence.
func abandon(t *testing.T, c *cli, date string) {
	t.Helper()
	if _, err := c.client().Collection("snapshots").Doc(date).Update(context.Background(), []firestore.Update{
		{Path: "metadata.status", Value: "partial"},
		{Path: "metadata.writeState", Value: "writing"},
		{Path: "metadata.writeComplete", Value: false},
	}); err != nil {
		t.Fatal(err)
	}
}

// abandonLegacy makes the root of date look as a writer of a snapwriter
// version before writeState, killed mid-write, left it: status "writing".
func abandonLegacy(t *testing.T, c *cli, date string) {
	t.Helper()
	if _, err := c.client().Collection("snapshots").Doc(date).Update(context.Background(), []firestore.Update{
		{Path: "metadata.status", Value: "writing"},
		{Path: "metadata.writeState", Value: firestore.Delete},
		{Path: "metadata.writeComplete", Value: false},
	}); err != nil {
		t.Fatal(err)
	}
}

// listStates runs list --json with extra args and returns date → state.
func listStates(t *testing.T, c *cli, extra ...string) map[string]string {
	t.Helper()
	code, out, errs := c.run("", append([]string{"list", "--json"}, extra...)...)
	var list []snapshot.Summary
	if code != exitOK || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("list --json: exit %d\n%s\n%s", code, out, errs)
	}
	states := map[string]string{}
	for _, s := range list {
		states[s.SnapshotID] = string(s.State)
	}
	return states
}

// listText runs list with extra args and returns its output.
func listText(t *testing.T, c *cli, extra ...string) string {
	t.Helper()
	code, out, errs := c.run("", append([]string{"list"}, extra...)...)
	if code != exitOK {
		t.Fatalf("list: exit %d\n%s\n%s", code, out, errs)
	}
	return out
}

// row returns the table row of date in list's text output.
func row(out, date string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, date+" ") {
			return l
		}
	}
	return ""
}

// A root left "writing" is interrupted while no lock holds its key, and
// writing while one does; complete and partial snapshots are as before.
// The text output says what to do next; --json shows the same states.
func TestListLiveness(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	const done, part = "2026-11-18", "2026-11-19"
	for _, d := range []string{done, day} {
		if code, _, errs := c.run(genJSON(t, d, 5), "write", "--input", "-"); code != exitOK {
			t.Fatalf("write %s: exit %d\n%s", d, code, errs)
		}
	}
	c.writePartial(genJSON(t, part, 60))
	abandon(t, c, day)

	want := map[string]string{done: "complete", part: "partial", day: "interrupted"}
	if got := listStates(t, c); !maps.Equal(got, want) {
		t.Errorf("dead writer: states %v, want %v", got, want)
	}
	out := listText(t, c)
	if r := row(out, day); !strings.Contains(r, "interrupted") || !strings.Contains(r, "partial") {
		t.Errorf("row of %s: %q\n%s", day, r, out)
	}
	for _, want := range []string{
		day + " interrupted: its writer died",
		"snapwriter repair --date " + day + " --input FILE",
		"or write it again",
		part + " partial: 50 districts failed (1, 2, 3, 4, 5, 6, 7, 8, 9, 10 … and 40 more; --json lists them all); run `snapwriter repair --date " + part + " --input FILE`",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("list does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, done+" complete:") {
		t.Errorf("a next step for a complete snapshot:\n%s", out)
	}
	sameState(t, c, "interrupted")

	// A live lock on the key, whatever its fence: a writer is at work.
	c.acquire(c.snapKey("firestore", day), time.Minute)
	want[day] = "writing"
	if got := listStates(t, c); !maps.Equal(got, want) {
		t.Errorf("live lock: states %v, want %v", got, want)
	}
	out = listText(t, c)
	if r := row(out, day); !strings.Contains(r, "writing") || strings.Contains(r, "interrupted") || !strings.Contains(r, "partial") {
		t.Errorf("row of %s with a live lock: %q", day, r)
	}
	if !strings.Contains(out, day+" writing: a writer is at work: 5 of 5 districts written, 0 failed, 0 pending") || strings.Contains(out, "--date "+day) {
		t.Errorf("a live write: want it said that a writer is at work, and no repair:\n%s", out)
	}
	sameState(t, c, "writing")
}

// sameState checks that get and verify name the state of the snapshot of
// day as list does (the Firestore lock checked), exit 3 both, and offer
// repair only when no writer is at work.
func sameState(t *testing.T, c *cli, want string) {
	t.Helper()
	live := want == "writing"
	code, _, errs := c.run("", "get", "--date", day)
	if code != exitPartial || !strings.Contains(errs, "snapshot "+day+" is "+want+":") || strings.Contains(errs, "a writer is at work") != live ||
		strings.Contains(errs, "snapwriter repair") == live {
		t.Errorf("get: exit %d, want 3 and the state %s\n%s", code, want, errs)
	}
	code, out, errs := c.run("", "verify", "--date", day)
	if code != exitPartial || !strings.Contains(out, ", "+want+" —") || strings.Contains(errs, "a writer is at work") != live ||
		strings.Contains(errs, "snapwriter repair") == live {
		t.Errorf("verify: exit %d, want 3 and the state %s\n%s%s", code, want, out, errs)
	}
}

// A root written under the PostgreSQL lock is unknown without the lock
// database, interrupted with it and no lock, and writing with a live one;
// a Firestore-locked root is checked in Firestore either way.
func TestListLivenessPostgres(t *testing.T) {
	t.Parallel()
	c, dsn, pool := pgCLI(t)
	const fsDay = "2026-11-19"
	pgFlags := []string{"--lock-backend", "postgres", "--lock-dsn", dsn}
	if code, _, errs := c.run(genJSON(t, day, 5), append([]string{"write", "--input", "-"}, pgFlags...)...); code != exitOK {
		t.Fatalf("write: exit %d\n%s", code, errs)
	}
	if code, _, errs := c.run(genJSON(t, fsDay, 5), "write", "--input", "-"); code != exitOK {
		t.Fatalf("write: exit %d\n%s", code, errs)
	}
	abandon(t, c, day)
	abandon(t, c, fsDay)

	if got, want := listStates(t, c), map[string]string{day: "unknown", fsDay: "interrupted"}; !maps.Equal(got, want) {
		t.Errorf("without the DSN: states %v, want %v", got, want)
	}
	out := listText(t, c)
	if !strings.Contains(out, day+" unknown: written under the PostgreSQL lock, which was not checked; run `snapwriter list --lock-backend postgres --lock-dsn DSN`") {
		t.Errorf("list without the DSN does not say how to check:\n%s", out)
	}
	if got, want := listStates(t, c, pgFlags...), map[string]string{day: "interrupted", fsDay: "interrupted"}; !maps.Equal(got, want) {
		t.Errorf("with the DSN, no lock: states %v, want %v", got, want)
	}

	b, err := pglock.New(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := b.Acquire(context.Background(), c.snapKey("postgres", day), time.Minute); err != nil || !r.OK {
		t.Fatal(r, err)
	}
	if got, want := listStates(t, c, pgFlags...), map[string]string{day: "writing", fsDay: "interrupted"}; !maps.Equal(got, want) {
		t.Errorf("with the DSN, lock held: states %v, want %v", got, want)
	}
	out = listText(t, c, pgFlags...)
	if r := row(out, day); !strings.Contains(r, " writing ") {
		t.Errorf("row of %s: %q\n%s", day, r, out)
	}
	noSecrets(t, "list output", out, dsn)
	// The same lock is invisible to Firestore: without the DSN, unknown.
	if got := listStates(t, c); got[day] != "unknown" {
		t.Errorf("without the DSN, lock held: %s is %s, want unknown", day, got[day])
	}
	// list only reads the lock database: it does not create the tables,
	// and a database without them (the wrong DSN) is a runtime failure.
	fresh := pg.TestDatabase(t)
	if code, _, errs := c.run("", "list", "--lock-backend", "postgres", "--lock-dsn", fresh); code != exitError ||
		!strings.Contains(errs, "PostgreSQL lock tables") || !strings.Contains(errs, "does not exist") {
		t.Errorf("list on a database without lock tables: exit %d\n%s", code, errs)
	}
	fp, err := pglock.NewPool(context.Background(), fresh)
	if err != nil {
		t.Fatal(err)
	}
	defer fp.Close()
	var created bool
	if err := fp.QueryRow(context.Background(), `SELECT to_regclass('syncguard_locks') IS NOT NULL`).Scan(&created); err != nil || created {
		t.Errorf("list created the lock table (%v)", err)
	}
	// Bad lock flags are usage errors, as for every command.
	if code, _, errs := c.run("", "list", "--lock-backend", "postgres"); code != exitUsage || !strings.Contains(errs, "--lock-dsn") {
		t.Errorf("list --lock-backend postgres without a DSN: exit %d\n%s", code, errs)
	}
}

// A root of a snapwriter version before writeState, left "writing" by a
// dead writer, is interrupted too; `repair` brings it to the current form.
func TestListLegacyInterrupted(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	in := genJSON(t, day, 60)
	c.writePartial(in)
	abandonLegacy(t, c, day)
	if got := listStates(t, c); got[day] != "interrupted" {
		t.Errorf("legacy root left writing: %v, want interrupted", got)
	}
	if code, _, errs := c.run(in, "repair", "--date", day, "--input", "-"); code != exitOK {
		t.Fatalf("repair: exit %d\n%s", code, errs)
	}
	md := c.rootMetadata(day)
	if md["status"] != "success" || md["writeState"] != "finished" || md["writeComplete"] != true {
		t.Errorf("after repair: status %v writeState %v writeComplete %v", md["status"], md["writeState"], md["writeComplete"])
	}
	if got := listStates(t, c); got[day] != "complete" {
		t.Errorf("after repair: %v", got)
	}
}

// "Complete" is status "success" and writeComplete not false, as the
// application's readers take it: a snapshot written whole from an input
// whose own status is "partial" is unsuccessful (get prints it and exits
// 0, latest skips it), and a root the application left "success" with
// writeComplete false is partial (latest skips it too).
func TestCompleteMeansSuccess(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	const older, inputPartial, appPartial = "2026-11-17", "2026-11-18", "2026-11-19"
	if code, _, errs := c.run(genJSON(t, older, 5), "write", "--input", "-"); code != exitOK {
		t.Fatalf("write %s: exit %d\n%s", older, code, errs)
	}
	partialInput := edit(t, genJSON(t, inputPartial, 5), func(m map[string]any) { m["status"] = "partial" })
	if code, _, errs := c.run(partialInput, "write", "--input", "-"); code != exitOK {
		t.Fatalf("write %s: exit %d\n%s", inputPartial, code, errs)
	}
	if code, _, errs := c.run(genJSON(t, appPartial, 5), "write", "--input", "-"); code != exitOK {
		t.Fatalf("write %s: exit %d\n%s", appPartial, code, errs)
	}
	// As the application's writer leaves a partial write.
	if _, err := c.client().Collection("snapshots").Doc(appPartial).Update(context.Background(), []firestore.Update{
		{Path: "metadata.writeComplete", Value: false},
		{Path: "metadata.writeState", Value: firestore.Delete},
	}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{older: "complete", inputPartial: "unsuccessful", appPartial: "partial"}
	if got := listStates(t, c); !maps.Equal(got, want) {
		t.Errorf("states %v, want %v", got, want)
	}
	if out := listText(t, c); !strings.Contains(out, inputPartial+` unsuccessful: every district is written, but its input's status is "partial"`) {
		t.Errorf("list does not explain the unsuccessful snapshot:\n%s", out)
	}
	if code, out, errs := c.run("", "get", "--date", inputPartial); code != exitOK || !strings.Contains(out, `"status": "partial"`) {
		t.Errorf("get %s: exit %d\n%s\n%s", inputPartial, code, out, errs)
	}
	code, out, errs := c.run("", "get", "--date", "latest", "--compact")
	if code != exitOK || !strings.Contains(out, `"dataAsOfDate":"`+older+`"`) {
		t.Errorf("get --date latest: exit %d, want the snapshot of %s\n%s\n%s", code, older, out, errs)
	}
}

// rootMetadata reads the root's metadata of date.
func (c *cli) rootMetadata(date string) map[string]any {
	c.t.Helper()
	s, err := c.client().Collection("snapshots").Doc(date).Get(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	md, _ := s.Data()["metadata"].(map[string]any)
	return md
}
