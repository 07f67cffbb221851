package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/snapwriter/snapwriter/backfill"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// recordMethods makes c record the unary RPCs its commands send, by
// method name (Commit, BeginTransaction, …).
func (c *cli) recordMethods() func() []string {
	var mu sync.Mutex
	var methods []string
	c.interceptors = append(c.interceptors, func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		mu.Lock()
		methods = append(methods, method[strings.LastIndex(method, "/")+1:])
		mu.Unlock()
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(methods)
	}
}

// dryRun runs a --dry-run command line and fails the test unless it exits
// 0 having changed no document (snapshots, districts, locks, fence
// counters) and sent no write RPC.
func (c *cli) dryRun(stdin string, args ...string) string {
	c.t.Helper()
	methods := c.recordMethods()
	defer func() { c.interceptors = c.interceptors[:len(c.interceptors)-1] }()
	before := allDocs(c.t, c.project)
	code, out, errs := c.run(stdin, args...)
	if code != exitOK {
		c.t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errs)
	}
	if after := allDocs(c.t, c.project); after != before {
		c.t.Errorf("%v changed the stored documents", args)
	}
	for _, m := range methods() {
		switch m {
		case "Commit", "BeginTransaction", "Rollback", "BatchWrite":
			c.t.Errorf("%v sent a %s RPC", args, m)
		}
	}
	noSecrets(c.t, "the logs", errs, c.snapKey("firestore", day))
	return out
}

func decodePlan(t *testing.T, out string) snapshot.Plan {
	t.Helper()
	var p snapshot.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	return p
}

// write --dry-run plans what the write then does, and does nothing.
func TestWriteDryRun(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	in := genJSON(t, day, 132)
	p := decodePlan(t, c.dryRun(in, "write", "--input", "-", "--dry-run", "--json"))
	if p.Action != snapshot.PlanWrite || p.Stored != snapshot.StoredNone || p.Districts != 132 || p.Chunks != 3 ||
		p.Manifest.Form != snapshot.ManifestInline || p.Lock.Key != c.snapKey("firestore", day) {
		t.Fatalf("plan = %+v", p)
	}
	if n := c.docCount(); n != 0 {
		t.Fatalf("the dry run left %d documents", n)
	}
	// Chunks of 100 need a budget of at least 1,000 writes/s: a chunk
	// holds at most a tenth of a second of it.
	text := c.dryRun(in, "write", "--input", "-", "--dry-run", "--batch-size", "100", "--initial-write-rate", "1000")
	for _, want := range []string{"dry run of write 2026-11-20 (nothing written, no lock taken): the whole snapshot would be written", "132 in the input", "chunks:", "2 of at most 100",
		"manifest:", "inline", "root document:", "1048576-byte limit", p.Lock.Key, p.Lock.KeyHash} {
		if !strings.Contains(text, want) {
			t.Errorf("text output lacks %q:\n%s", want, text)
		}
	}

	code, out, errs := c.run(in, "write", "--input", "-", "--json")
	if code != exitOK {
		t.Fatalf("write: exit %d\n%s", code, errs)
	}
	var res snapshot.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Chunks != p.Chunks {
		t.Errorf("the write committed %d chunks, the plan said %d", res.Chunks, p.Chunks)
	}
	root, err := c.client().Collection("snapshots").Doc(day).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if size := model.FirestoreSize(root.Data()); size-p.RootBytesComplete > 16 || p.RootBytesComplete-size > 16 {
		t.Errorf("stored root is %d bytes, the plan said %d", size, p.RootBytesComplete)
	}
	if md := c.rootMetadata(day); md["writerLockKeyHash"] != p.Lock.KeyHash {
		t.Errorf("the write recorded key hash %v, the plan said %s", md["writerLockKeyHash"], p.Lock.KeyHash)
	}
	// PostgreSQL's key names the project; no lock database is opened.
	p = decodePlan(t, c.dryRun(in, "write", "--input", "-", "--dry-run", "--json", "--lock-backend", "postgres", "--lock-dsn", "postgres://nobody@127.0.0.1:1/none", "--allow-lock-backend-switch"))
	if p.Lock.Backend != "postgres" || p.Lock.Key != c.snapKey("postgres", day) {
		t.Errorf("postgres plan lock = %+v", p.Lock)
	}
}

// repair --dry-run lists exactly the districts the repair then writes, and
// why.
func TestRepairDryRun(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	in := genJSON(t, day, 60)
	c.env["SNAPWRITER_BATCH_SIZE"] = "10"
	c.writePartial(in) // district 7's chunk, districts 1 to 10, fails
	ctx := context.Background()
	districtsRef := c.client().Collection("snapshots").Doc(day).Collection("districts")
	if _, err := districtsRef.Doc("district_55").Delete(ctx); err != nil {
		t.Fatal(err)
	}
	changed := edit(t, in, func(m map[string]any) {
		districts(m)[40].(map[string]any)["dryRunNote"] = "changed"
	})
	file := writeFile(t, "in.json", changed)
	// Without --rewrite-changed the changed district is refused: exit 2,
	// as repair itself refuses it.
	if code, _, errs := c.run("", "repair", "--date", day, "--input", file, "--dry-run"); code != exitUsage || !strings.Contains(errs, "district 41") ||
		!strings.Contains(errs, "`snapwriter repair --rewrite-changed` re-writes what differs") {
		t.Errorf("repair --dry-run of a changed input: exit %d, want 2\n%s", code, errs)
	}
	p := decodePlan(t, c.dryRun("", "repair", "--date", day, "--input", file, "--dry-run", "--json", "--rewrite-changed"))
	got := map[string]snapshot.RewriteReason{}
	for _, d := range p.Rewrite {
		got[d.DistrictID] = d.Reason
	}
	if got["55"] != snapshot.RewriteMissing || got["41"] != snapshot.RewriteChanged || got["7"] != snapshot.RewriteFailed || p.Action != snapshot.PlanRepair {
		t.Fatalf("plan = %+v", p)
	}
	text := c.dryRun("", "repair", "--date", day, "--input", file, "--dry-run", "--rewrite-changed")
	for _, want := range []string{"districts written again (12)", "missing (1): 55", "changed (1): 41", "failed (10): "} {
		if !strings.Contains(text, want) {
			t.Errorf("text output lacks %q:\n%s", want, text)
		}
	}

	code, out, errs := c.run("", "repair", "--date", day, "--input", file, "--json", "--rewrite-changed")
	if code != exitOK {
		t.Fatalf("repair: exit %d\n%s", code, errs)
	}
	var res snapshot.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	var wrote, planned []string
	for _, b := range res.BatchResults {
		if b.BatchIndex > 0 {
			wrote = append(wrote, b.DistrictIDs...)
		}
	}
	for _, d := range p.Rewrite {
		planned = append(planned, d.DistrictID)
	}
	sort.Strings(wrote)
	sort.Strings(planned)
	if !slices.Equal(wrote, planned) || res.Chunks != p.Chunks {
		t.Errorf("repair wrote %v in %d chunks; the plan said %v in %d", wrote, res.Chunks, planned, p.Chunks)
	}
	p = decodePlan(t, c.dryRun("", "repair", "--date", day, "--input", file, "--dry-run", "--json"))
	if p.Action != snapshot.PlanSkip {
		t.Errorf("plan after the repair = %+v", p)
	}
}

// backfill --dry-run plans every date of the task; a bad input is exit 2
// with every bad input listed, as the backfill itself.
func TestBackfillDryRun(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	ds := dates("2026-03-01", 4)
	dir := inputDir(t, ds, 5)
	if code, _, errs := c.run("", "write", "--input", filepath.Join(dir, ds[1]+".json")); code != exitOK {
		t.Fatalf("write: %d %s", code, errs)
	}
	out := c.dryRun("", "backfill", "--input-dir", dir, "--from", ds[1], "--skip-complete", "--dry-run", "--json")
	var rep backfill.PlanReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	var got []string
	for _, p := range rep.Dates {
		got = append(got, p.SnapshotID+" "+string(p.Action))
		if p.Lock.KeyHash == "" {
			t.Errorf("%s: no lock key hash", p.SnapshotID)
		}
	}
	want := []string{ds[1] + " skip", ds[2] + " write", ds[3] + " write"}
	if !slices.Equal(got, want) {
		t.Errorf("planned %v, want %v", got, want)
	}
	text := c.dryRun("", "backfill", "--input-dir", dir, "--dry-run", "--task-index", "0", "--task-count", "1")
	if !strings.Contains(text, "4 dates, 4 to write") || !strings.Contains(text, ds[0]) {
		t.Errorf("table:\n%s", text)
	}

	for _, d := range []string{ds[0], ds[3]} {
		if err := os.WriteFile(filepath.Join(dir, d+".json"), []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before := allDocs(t, c.project)
	code, _, errs := c.run("", "backfill", "--input-dir", dir, "--dry-run")
	if code != exitUsage || !strings.Contains(errs, ds[0]+".json") || !strings.Contains(errs, ds[3]+".json") {
		t.Errorf("bad inputs: exit %d, want 2 naming both\n%s", code, errs)
	}
	if allDocs(t, c.project) != before {
		t.Error("a dry run with bad input changed documents")
	}
}

// A bad input is exit 2 before anything is read, dry run or not.
func TestDryRunBadInputExit2(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	bad := edit(t, genJSON(t, day, 5), func(m map[string]any) {
		districts(m)[2].(map[string]any)["districtId"] = "4/2"
	})
	for _, args := range [][]string{
		{"write", "--input", "-", "--dry-run"},
		{"repair", "--date", day, "--input", "-", "--dry-run", "--json"},
		{"write", "--input", "-", "--dry-run", "--batch-size", "0"},
	} {
		code, out, errs := c.run(bad, args...)
		if code != exitUsage || out != "" {
			t.Errorf("%v: exit %d, want 2; stdout %q\n%s", args, code, out, errs)
		}
	}
	if n := c.docCount(); n != 0 {
		t.Errorf("%d documents written", n)
	}
}
