package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/loadtest"
)

const ltColl = "lt_scratch"

// ltTree lists every document path in coll and one level below its
// documents, missing documents (subcollections without a root) included.
func ltTree(t *testing.T, c *cli, coll string) []string {
	t.Helper()
	ctx := context.Background()
	refs, err := c.client().Collection(coll).DocumentRefs(ctx).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range refs {
		out = append(out, r.Path)
		colls, err := r.Collections(ctx).GetAll()
		if err != nil {
			t.Fatal(err)
		}
		for _, sub := range colls {
			below, err := sub.DocumentRefs(ctx).GetAll()
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range below {
				out = append(out, b.Path)
			}
		}
	}
	return out
}

func TestLoadtestCommandTableAndJSON(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	code, out, errs := c.run("", "loadtest", "--collection", ltColl, "--districts", "120", "--concurrency", "1,3",
		"--rounds", "1", "--lock-ttl", "10s", "--record-interval", "200ms")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"concurrency", "districts/s", "chunk p50 ms", "p99 ms", "aborted retries", "root commits",
		"lock wait ms", "failed chunks", "rounds, in the order run", "complete", "cleanup: deleted",
		"write rate against the budget", "measured/s", "busiest 1 s", "limit/s", "lowest limit/s", "budget wait ms",
		"RESOURCE_EXHAUSTED", "ABORTED", "verdict: ", "The database sustained"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if left := ltTree(t, c, ltColl); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}

	// The write flags reach loadtest's writers: a budget of 77 writes/s
	// from the start.
	code, out, errs = c.run("", "loadtest", "--collection", ltColl, "--districts", "60", "--concurrency", "2",
		"--rounds", "2", "--lock-ttl", "10s", "--json", "--write-ramp=false", "--max-write-rate", "77")
	if code != exitOK {
		t.Fatalf("--json: exit %d\n%s", code, errs)
	}
	var rep loadtest.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	// At 77/s a chunk holds at most 7 districts (a tenth of a second of
	// the budget): 9 chunks a round.
	if rep.Collection != ltColl || rep.Districts != 60 || len(rep.Levels) != 1 || rep.Levels[0].Rounds != 2 ||
		len(rep.Rounds) != 2 || !rep.Rounds[1].Complete || rep.Levels[0].ChunkLatencyMs.Chunks != 18 {
		t.Errorf("report %+v", rep)
	}
	for _, r := range rep.Rounds {
		if w := r.WriteRate; w.LimitPerSec != 77 || w.MinLimitPerSec != 77 || w.MeasuredPerSec <= 0 || w.BusiestSecond <= 0 {
			t.Errorf("round %d: write rate %+v, want measured against a limit of 77/s", r.Round, w)
		}
	}
	if rep.Verdict.Text == "" || rep.Verdict.BudgetLimited == nil {
		t.Errorf("verdict %+v", rep.Verdict)
	}
	for _, key := range []string{`"levels"`, `"districtsPerSecond"`, `"chunkLatencyMs"`, `"p95"`, `"abortedRetries"`,
		`"otherRetries"`, `"rootCommits"`, `"lockWaitMs"`, `"failedChunks"`, `"documentsDeleted"`, `"writeRate"`,
		`"measuredPerSec"`, `"busiestSecond"`, `"limitPerSec"`, `"waitedMs"`, `"resourceExhausted"`, `"verdict"`,
		`"sustainedPerSec"`} {
		if !strings.Contains(out, key) {
			t.Errorf("--json output lacks %s", key)
		}
	}
	if left := ltTree(t, c, ltColl); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

func TestLoadtestCommandRefuses(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	// A real snapshot in "real", written as the job writes it.
	file := writeFile(t, day+".json", genJSON(t, day, 5))
	if code, _, errs := c.run("", "write", "--collection", "real", "--input", file); code != exitOK {
		t.Fatalf("write: exit %d\n%s", code, errs)
	}
	before := ltTree(t, c, "real")
	fences := docsIn(t, c, "fence_counters")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no collection", nil},
		{"snapshots", []string{"--collection", "snapshots"}},
		{"lock collection", []string{"--collection", "locks"}},
		{"real snapshot", []string{"--collection", "real"}},
		{"zero concurrency", []string{"--collection", ltColl, "--concurrency", "0"}},
		{"repeated concurrency", []string{"--collection", ltColl, "--concurrency", "3,3"}},
		{"no rounds", []string{"--collection", ltColl, "--rounds", "0"}},
		{"bad date", []string{"--collection", ltColl, "--date", "2000-02-30"}},
	} {
		code, out, errs := c.run("", append([]string{"loadtest", "--districts", "10"}, tc.args...)...)
		if code != exitUsage || out != "" {
			t.Errorf("%s: exit %d, stdout %q; want 2 and nothing\n%s", tc.name, code, out, errs)
		}
	}
	if after := ltTree(t, c, "real"); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("the real snapshot changed: %v, was %v", after, before)
	}
	if after := docsIn(t, c, "fence_counters"); len(after) != len(fences) {
		t.Errorf("fence counters %v, were %v: a refused run took a lock", after, fences)
	}
	if left := ltTree(t, c, ltColl); len(left) != 0 {
		t.Errorf("a refused run wrote: %v", left)
	}
}

// startLoadtest starts the binary on a long write (one chunk at a time) and
// returns once a district chunk has committed, with its stderr and the
// logs read from it so far (see startLogged).
func startLoadtest(t *testing.T, c *cli, stdout *bytes.Buffer, args ...string) (*exec.Cmd, io.Reader, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"loadtest", "--collection", ltColl, "--districts", "1000",
		"--concurrency", "1", "--rounds", "1", "--lock-ttl", "10s"}, args...)...)
	cmd.Env = binaryEnv(c.project)
	cmd.Stdout = stdout
	stderr, sc, logs := startLogged(t, cmd)
	// The root's commit is logged as a batch too: wait for two more.
	if !scanCommitted(sc, 3) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the run ended before two chunks committed:\n%s", logs.String())
	}
	return cmd, stderr, logs
}

// SIGINT mid-write: the round stops, everything is deleted, the figures so
// far are printed, exit 130.
func TestLoadtestBinarySIGINTCleansUp(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var stdout bytes.Buffer
	cmd, stderr, logs := startLoadtest(t, c, &stdout)
	if code := stop(t, cmd, syscall.SIGINT, 2*time.Minute, stderr, logs); code != 128+int(syscall.SIGINT) {
		t.Fatalf("exit %d, want 130\n%s\n%s", code, stdout.String(), logs.String())
	}
	if out := stdout.String(); !strings.Contains(out, "PARTIAL") || !strings.Contains(out, "interrupted after 1 of 1 round") {
		t.Errorf("stdout does not report the interrupted round:\n%s", out)
	}
	if left := ltTree(t, c, ltColl); len(left) != 0 {
		t.Errorf("left behind: %d documents, first %v", len(left), left[0])
	}
	if locks := docsIn(t, c, "locks"); len(locks) != 0 {
		t.Errorf("locks left held: %v", locks)
	}
}

// SIGKILL mid-write leaves the snapshot behind; the next run deletes it
// before writing, and leaves the collection empty.
func TestLoadtestBinaryKilledRunLeftoversRemoved(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var stdout bytes.Buffer
	cmd, stderr, _ := startLoadtest(t, c, &stdout)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, stderr)
	_ = cmd.Wait()
	left := ltTree(t, c, ltColl)
	if len(left) < 1+100 {
		t.Fatalf("a killed run left %d documents; want its root and two chunks at least", len(left))
	}

	rerun := exec.Command(binary(t), "loadtest", "--collection", ltColl, "--districts", "60", "--concurrency", "2",
		"--rounds", "1", "--lock-ttl", "10s", "--json")
	rerun.Env = binaryEnv(c.project)
	var out, errs bytes.Buffer
	rerun.Stdout, rerun.Stderr = &out, &errs
	if err := rerun.Run(); err != nil {
		t.Fatalf("rerun: %v\n%s", err, errs.String())
	}
	var rep loadtest.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("rerun --json: %v\n%s", err, out.String())
	}
	if rep.LeftoversDeleted < len(left) {
		t.Errorf("rerun deleted %d leftovers; %d were there", rep.LeftoversDeleted, len(left))
	}
	if left := ltTree(t, c, ltColl); len(left) != 0 {
		t.Errorf("left behind after the rerun: %d documents, first %v", len(left), left[0])
	}
}

// On the PostgreSQL lock backend the run lock and the snapshots' locks
// live in PostgreSQL; nothing is left in Firestore, and the locks are
// released.
func TestLoadtestCommandPostgresLocks(t *testing.T) {
	t.Parallel()
	c, dsn, pool := pgCLI(t)
	code, out, errs := c.run("", "loadtest", "--collection", ltColl, "--districts", "60", "--concurrency", "2",
		"--rounds", "1", "--lock-ttl", "10s", "--lock-backend", "postgres", "--lock-dsn", dsn)
	if code != exitOK || !strings.Contains(out, "lock backend postgres") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if left := ltTree(t, c, ltColl); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
	if fs := docsIn(t, c, "fence_counters"); len(fs) != 0 {
		t.Errorf("Firestore fence counters %v on the PostgreSQL backend", fs)
	}
	var held, counters int
	if err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM syncguard_locks), (SELECT count(*) FROM syncguard_fence_counters)`).
		Scan(&held, &counters); err != nil {
		t.Fatal(err)
	}
	// The run lock's counter and the scratch snapshot's: kept, as fence
	// counters always are.
	if held != 0 || counters != 2 {
		t.Errorf("%d locks held, %d fence counters; want 0 and 2", held, counters)
	}
}
