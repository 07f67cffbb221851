package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	vkit "cloud.google.com/go/firestore/apiv1"
	"google.golang.org/grpc"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/pgserver"
	"github.com/snapwriter/snapwriter/snapshot"
)

var (
	emu *emulator.Emulator
	pg  *pgserver.Server // for --lock-backend postgres; each test has a database of its own
)

func TestMain(m *testing.M) {
	code := pgserver.Main(m, &pg, func() int { return emulator.Main(m, &emu) })
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

const day = "2026-11-20"

// cli runs snapwriter in process against a fresh emulator project.
type cli struct {
	t            *testing.T
	project      string
	env          map[string]string
	interceptors []grpc.UnaryClientInterceptor
	// terminal: the command believes its stderr a terminal (a person
	// reads it): console logs and a bar by default.
	terminal bool
	// now, if set, is the command's clock (app.now): what "today" is, and
	// doctor's clock check.
	now func() time.Time
	// stdinTerminal: the command believes its stdin a terminal (a person
	// can answer a question): lock release --date asks to confirm.
	stdinTerminal bool
	// ctx, when set, is the context the command runs under (a test's
	// signal: a cause of signals.Stopped).
	ctx context.Context
}

func newCLI(t *testing.T) *cli {
	project := emulator.ProjectID(t)
	return &cli{t: t, project: project, env: map[string]string{
		"GOOGLE_CLOUD_PROJECT":    project,
		"FIRESTORE_EMULATOR_HOST": emu.Host,
	}}
}

func (c *cli) run(stdin string, args ...string) (int, string, string) {
	c.t.Helper()
	return c.runDialing(stdin, nil, args...)
}

// runDialing is run that also calls dialed, if not nil, for every
// Firestore client the command opens.
func (c *cli) runDialing(stdin string, dialed func(), args ...string) (int, string, string) {
	c.t.Helper()
	var out, errb bytes.Buffer
	a := newApp(strings.NewReader(stdin), &out, &errb, func(k string) (string, bool) {
		v, ok := c.env[k]
		return v, ok
	})
	a.newClient = func(ctx context.Context, project, _ string) (*firestore.Client, error) {
		if dialed != nil {
			dialed()
		}
		if project == "" {
			return nil, usagef("--project (or GOOGLE_CLOUD_PROJECT) is required")
		}
		return c.dial(ctx, project)
	}
	a.newAPIClient = c.dialAPI
	a.stderrTerminal = c.terminal
	if c.now != nil {
		a.now = c.now
	}
	a.stdinTerminal = c.stdinTerminal
	ctx := c.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	code := a.run(ctx, args)
	return code, out.String(), errb.String()
}

// dial opens a client on the host FIRESTORE_EMULATOR_HOST names in c.env,
// as the Firestore client would: the shared emulator, or an address a test
// made unreachable.
func (c *cli) dial(ctx context.Context, project string) (*firestore.Client, error) {
	return c.emulator().Client(ctx, project, c.interceptors...)
}

// emulator is the emulator FIRESTORE_EMULATOR_HOST names in c.env.
func (c *cli) emulator() *emulator.Emulator {
	if h := c.env["FIRESTORE_EMULATOR_HOST"]; h != emu.Host {
		return &emulator.Emulator{Host: h}
	}
	return emu
}

// dialAPI opens the writer's API client as dial opens the Firestore
// client: on the same host, with the same interceptors.
func (c *cli) dialAPI(ctx context.Context) (*vkit.Client, error) {
	return c.emulator().APIClient(ctx, c.interceptors...)
}

func (c *cli) client() *firestore.Client { return emu.TestClientFor(c.t, c.project) }

// docCount counts every document the project holds: snapshots, districts,
// locks and fence counters.
func (c *cli) docCount() int {
	c.t.Helper()
	ctx := context.Background()
	cl := c.client()
	n := 0
	for _, coll := range []string{"snapshots", "locks", "fence_counters"} {
		docs, err := cl.Collection(coll).Documents(ctx).GetAll()
		if err != nil {
			c.t.Fatal(err)
		}
		n += len(docs)
	}
	groups, err := cl.CollectionGroup("districts").Documents(ctx).GetAll()
	if err != nil {
		c.t.Fatal(err)
	}
	return n + len(groups)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func genJSON(t *testing.T, date string, n int) string {
	t.Helper()
	b, err := json.Marshal(model.Generate(date, n, 1))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// edit decodes a generated snapshot as a generic tree, applies fn, re-encodes.
func edit(t *testing.T, src string, fn func(m map[string]any)) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(src), &m); err != nil {
		t.Fatal(err)
	}
	fn(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func districts(m map[string]any) []any { return m["payload"].(map[string]any)["districts"].([]any) }

func TestWriteGetListEndToEnd(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	in := genJSON(t, day, 132)
	code, out, errs := c.run(in, "write", "--input", "-", "--json")
	if code != exitOK {
		t.Fatalf("write exit %d\n%s", code, errs)
	}
	var res snapshot.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	if res.Outcome != snapshot.OutcomeComplete || res.TotalBatches != 4 || res.Chunks != 3 || res.SuccessfulChunks != 3 || res.DistrictsWritten != 132 || res.Fence != "000000000000001" || len(res.BatchResults) != 4 {
		t.Errorf("result = %+v", res)
	}
	for _, key := range []string{`"snapshotId"`, `"outcome": "complete"`, `"complete": true`, `"manifestRecorded": true`, `"totalBatches"`, `"successfulBatches"`, `"failedBatches"`,
		`"chunks"`, `"successfulChunks"`, `"failedChunks"`,
		`"districtsWritten"`, `"failedDistricts"`, `"totalDurationMs"`, `"fence"`, `"batchResults"`, `"batchIndex"`,
		`"operationCount"`, `"success"`, `"retryAttempts"`, `"durationMs"`, `"districtIds"`} {
		if !strings.Contains(out, key) {
			t.Errorf("--json output lacks %s", key)
		}
	}
	// Logs: Cloud Logging keys, one line per batch, one summary.
	batches, summaries := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(errs), "\n") {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(entry["time"])); err != nil || entry["severity"] == nil || entry["message"] == nil {
			t.Errorf("log line lacks severity/message/RFC 3339 time: %q", line)
		}
		switch entry["message"] {
		case "batch committed":
			batches++
		case "snapshot write finished":
			summaries++
		}
		if strings.Contains(line, c.snapKey("firestore", day)) {
			t.Errorf("log line carries the raw lock key: %q", line)
		}
	}
	if batches != 4 || summaries != 1 {
		t.Errorf("logged %d batch lines and %d summaries, want 4 and 1", batches, summaries)
	}

	code, out, errs = c.run("", "get", "--date", day)
	if code != exitOK {
		t.Fatalf("get exit %d: %s", code, errs)
	}
	want, _ := model.Decode(strings.NewReader(in))
	got, err := model.Decode(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if !model.Equal(got, want) {
		t.Errorf("get differs from the input: %s", model.Diff(got, want))
	}
	code, out, _ = c.run("", "get", "--date", "latest", "--compact")
	if code != exitOK || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("get latest --json: exit %d, %d lines", code, strings.Count(out, "\n"))
	}

	code, out, _ = c.run("", "list")
	if code != exitOK || !strings.Contains(out, day) || !strings.Contains(out, "complete") || !strings.Contains(out, "000000000000001") {
		t.Errorf("list: exit %d\n%s", code, out)
	}
	code, out, _ = c.run("", "list", "--json")
	var list []snapshot.Summary
	if code != exitOK || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].Districts != 132 {
		t.Errorf("list --json: exit %d\n%s", code, out)
	}
}

// Every kind of bad input: exit 2, a message that names the problem, and not
// one document written.
func TestBadInputExit2WritesNothing(t *testing.T) {
	t.Parallel()
	good := genJSON(t, day, 5)
	cases := []usageCase{
		{"malformed JSON", `{"snapshot_id": "x",`, nil, nil, "JSON"},
		{"trailing garbage", good + "}", nil, nil, ""},
		{"unreal --date", good, []string{"--date", "2026-02-30"}, nil, "2026-02-30"},
		{"bad --date format", good, []string{"--date", "20261120"}, nil, "20261120"},
		{"unreal date in data", edit(t, good, func(m map[string]any) {
			m["payload"].(map[string]any)["metadata"].(map[string]any)["dataAsOfDate"] = "2026-13-01"
		}), nil, nil, "2026-13-01"},
		{"bad district id", edit(t, good, func(m map[string]any) {
			districts(m)[2].(map[string]any)["districtId"] = "4/2"
		}), nil, nil, "districts[2]"},
		{"duplicate district id", edit(t, good, func(m map[string]any) {
			d := districts(m)
			d[3].(map[string]any)["districtId"] = d[1].(map[string]any)["districtId"]
		}), nil, nil, "duplicate"},
		{"no districts", edit(t, good, func(m map[string]any) {
			m["payload"].(map[string]any)["districts"] = []any{}
		}), nil, nil, "districts"},
		{"oversize district", edit(t, good, func(m map[string]any) {
			districts(m)[0].(map[string]any)["blob"] = strings.Repeat("x", 1<<20)
		}), nil, nil, "districts[0]"},
		{"districts not an array", edit(t, good, func(m map[string]any) {
			m["payload"].(map[string]any)["districts"] = map[string]any{}
		}), nil, nil, "districts"},
		{"batch size 0", good, []string{"--batch-size", "0"}, nil, "--batch-size"},
		{"batch size 501", good, []string{"--batch-size", "501"}, nil, "--batch-size"},
		{"concurrency 0", good, []string{"--concurrency", "0"}, nil, "--concurrency"},
		{"record interval 0", good, []string{"--record-interval", "0s"}, nil, "--record-interval"},
		{"record interval 2h", good, []string{"--record-interval", "2h"}, nil, "--record-interval"},
		// The bounds are the library's (snapshot.CheckOptions): the CLI
		// names the flag and the bound in one message.
		{"concurrency 257", good, []string{"--concurrency", "257"}, nil, "--concurrency 257: want 1..256"},
		{"lock ttl 500ms", good, []string{"--lock-ttl", "500ms"}, nil, "--lock-ttl 500ms: want at least 1s"},
		{"record interval 5ms", good, []string{"--record-interval", "5ms"}, nil, "--record-interval 5ms: want 10ms..1m0s"},
		{"negative lock wait", good, []string{"--lock-wait", "-1s"}, nil, "--lock-wait -1s: must not be negative"},
		{"negative grace", good, []string{"--grace-period", "-1s"}, nil, "--grace-period -1s: must not be negative"},
		{"negative contention wait", good, []string{"--contention-wait", "-1s"}, nil, "--contention-wait -1s: must not be negative"},
		{"retries 101", good, []string{"--max-retries", "101"}, nil, "--max-retries 101: want 0..100"},
		{"negative retries", good, []string{"--max-retries", "-1"}, nil, "--max-retries"},
		{"bad log format", good, []string{"--log-format", "xml"}, nil, "--log-format"},
		{"unknown flag", good, []string{"--frobnicate"}, nil, "frobnicate"},
		{"bad env value", good, nil, map[string]string{"SNAPWRITER_CONCURRENCY": "lots"}, "SNAPWRITER_CONCURRENCY"},
		{"bad duration", good, []string{"--lock-ttl", "soon"}, nil, "lock-ttl"},
		{"missing input file", "", []string{"--input", "/nonexistent/snap.json"}, nil, "/nonexistent/snap.json"},
	}
	for i, tc := range cases {
		cases[i].args = append([]string{"write"}, tc.args...)
		if !contains(tc.args, "--input") {
			cases[i].args = append(cases[i].args, "--input", "-")
		}
	}
	checkUsage(t, cases)
	t.Run("missing --input", func(t *testing.T) {
		c := newCLI(t)
		if code, _, errs := c.run("", "write"); code != exitUsage || !strings.Contains(errs, "input") {
			t.Errorf("exit %d: %s", code, errs)
		}
	})
	t.Run("generate bad date", func(t *testing.T) {
		c := newCLI(t)
		if code, _, _ := c.run("", "generate", "--date", "2026-02-29"); code != exitUsage {
			t.Errorf("exit %d", code)
		}
	})
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestEnvironmentFlags(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SNAPWRITER_BATCH_SIZE"] = "10"
	c.env["SNAPWRITER_JSON"] = "true"
	code, out, errs := c.run(genJSON(t, day, 30), "write", "--input", "-")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res snapshot.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.TotalBatches != 4 {
		t.Errorf("SNAPWRITER_BATCH_SIZE=10 gave %d batches (%v)", res.TotalBatches, err)
	}
	// A flag on the command line beats the environment.
	code, out, _ = c.run(genJSON(t, day, 30), "write", "--input", "-", "--batch-size", "30")
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || res.TotalBatches != 2 {
		t.Errorf("--batch-size 30 over env: exit %d batches %d", code, res.TotalBatches)
	}
}

func TestPartialExit3(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SNAPWRITER_MAX_RETRIES"] = "0"
	c.interceptors = []grpc.UnaryClientInterceptor{denyDistrict("7")}
	code, out, errs := c.run(genJSON(t, day, 60), "write", "--input", "-")
	if code != exitPartial {
		t.Fatalf("exit %d, want 3\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, "PARTIAL") || !strings.Contains(errs, "repair") {
		t.Errorf("output does not say partial:\n%s\n%s", out, errs)
	}
	c.interceptors = nil
	if code, out, _ := c.run("", "list"); code != exitOK || !strings.Contains(out, "partial") {
		t.Errorf("list after partial: %d\n%s", code, out)
	}
}

func TestLockHeldExit4(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	locker, err := firestorelock.New(c.client())
	if err != nil {
		t.Fatal(err)
	}
	if r, err := locker.Acquire(context.Background(), c.snapKey("firestore", day), time.Minute); err != nil || !r.OK {
		t.Fatal(r, err)
	}
	code, _, errs := c.run(genJSON(t, day, 3), "write", "--input", "-", "--lock-wait", "200ms")
	if code != exitLockHeld || !strings.Contains(errs, "held") {
		t.Fatalf("exit %d, want 4\n%s", code, errs)
	}
}

func TestFencedOutExit5(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	if code, _, errs := c.run(genJSON(t, day, 3), "write", "--input", "-"); code != exitOK {
		t.Fatalf("first write: %d %s", code, errs)
	}
	// A newer writer's fence is on the root now.
	if _, err := c.client().Collection("snapshots").Doc(day).Update(context.Background(),
		[]firestore.Update{{Path: "metadata.writerFence", Value: "500000000000000"}}); err != nil {
		t.Fatal(err)
	}
	code, _, errs := c.run(genJSON(t, day, 3), "write", "--input", "-")
	if code != exitFenced || !strings.Contains(errs, "fenced out") {
		t.Fatalf("exit %d, want 5\n%s", code, errs)
	}
}

// The built binary, as a user runs it: generate | write, then get.
func TestBinary(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "snapwriter")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	env := append(os.Environ(), "FIRESTORE_EMULATOR_HOST="+emu.Host, "GOOGLE_CLOUD_PROJECT="+emulator.ProjectID(t))
	gen := exec.Command(bin, "generate", "--date", day, "--districts", "132")
	snap, err := gen.Output()
	if err != nil {
		t.Fatal(err)
	}
	write := exec.Command(bin, "write", "--input", "-", "--log-format", "console")
	write.Env, write.Stdin = env, bytes.NewReader(snap)
	if out, err := write.CombinedOutput(); err != nil {
		t.Fatalf("write: %v\n%s", err, out)
	}
	get := exec.Command(bin, "get", "--date", day)
	get.Env = env
	out, err := get.Output()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := model.Decode(bytes.NewReader(snap))
	b, err := model.Decode(bytes.NewReader(out))
	if err != nil || !model.Equal(a, b) {
		t.Errorf("binary round trip differs: %v %s", err, model.Diff(a, b))
	}
	bad := exec.Command(bin, "write", "--input", "-")
	bad.Env, bad.Stdin = env, strings.NewReader("{")
	if err := bad.Run(); err == nil || bad.ProcessState.ExitCode() != exitUsage {
		t.Errorf("bad input: exit %d, want 2", bad.ProcessState.ExitCode())
	}
}

// --input takes a file path or a per-district snapshot directory as the
// TypeScript application stores it; both write and read back the same.
func TestWriteFromFileAndDirectory(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	in := genJSON(t, day, 7)
	file := writeFile(t, "snap.json", in)
	if code, _, errs := c.run("", "write", "--input", file); code != exitOK {
		t.Fatalf("write --input file: exit %d\n%s", code, errs)
	}

	src, _ := model.Decode(strings.NewReader(in))
	dir := filepath.Dir(writeFile(t, "metadata.json", mustJSON(t, map[string]any{
		"snapshotId": "dir-snapshot", "createdAt": src.CreatedAt, "schemaVersion": "1.0.0",
		"calculationVersion": "2.1.0", "status": "success", "errors": []any{},
		"processingDuration": int64(99), "source": "dashboard", "dataAsOfDate": "2026-11-21",
	})))
	var entries []any
	for _, d := range src.Payload.Districts[:3] {
		name := "district_" + d.DistrictID + ".json"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(mustJSON(t, map[string]any{
			"districtId": d.DistrictID, "districtName": "District " + d.DistrictID, "status": "success", "data": memData(d),
		})), 0o600); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, map[string]any{"districtId": d.DistrictID, "fileName": name, "status": "success"})
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(mustJSON(t, map[string]any{"districts": entries})), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := c.run("", "write", "--input", dir, "--json")
	var res snapshot.Result
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || res.SnapshotID != "2026-11-21" || res.DistrictsWritten != 3 {
		t.Fatalf("write --input dir: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = c.run("", "get", "--date", "2026-11-21")
	got, err := model.Decode(strings.NewReader(out))
	if code != exitOK || err != nil || len(got.Payload.Districts) != 3 || got.SnapshotID != "dir-snapshot" ||
		got.Payload.Metadata.ProcessingDurationMs != 99 {
		t.Errorf("read back the directory snapshot: exit %d, %v, %+v", code, err, got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := model.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Stdin is spooled to a temporary file, which is gone by the time the
// write starts (and after it, whatever happens), and is written as given;
// bad input on stdin leaves nothing behind either. Not parallel: it sets
// TMPDIR for the process.
func TestStdinIsSpooledAndRemoved(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	c := newCLI(t)
	in := genJSON(t, day, 60)
	if code, _, errs := c.run(in, "write", "--input", "-"); code != exitOK {
		t.Fatalf("write exit %d\n%s", code, errs)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the spooled input was left behind: %v", left)
	}
	code, out, errs := c.run("", "get", "--date", day)
	if code != exitOK {
		t.Fatalf("get exit %d: %s", code, errs)
	}
	want, _ := model.Decode(strings.NewReader(in))
	got, err := model.Decode(strings.NewReader(out))
	if err != nil || !model.Equal(got, want) {
		t.Errorf("get differs from the input: %v %s", err, model.Diff(got, want))
	}
	if code, _, errs := c.run(in[:len(in)/2], "write", "--input", "-"); code != exitUsage || !strings.Contains(errs, "stdin: invalid snapshot") {
		t.Errorf("truncated stdin: exit %d\n%s", code, errs)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the spooled input was left behind: %v", left)
	}
}

// memData is the data of district d, for a test to read or change.
func memData(d model.DistrictStatistics) model.Object {
	data, err := d.Data()
	if err != nil {
		panic(fmt.Sprintf("district %s: %v", d.DistrictID, err))
	}
	return data
}

// A write given only --max-write-rate below the default start runs at it
// from its start, and its result line says so; --json carries the start.
func TestMaxWriteRateResultLine(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	code, out, errs := c.run(genJSON(t, day, 30), "write", "--input", "-", "--max-write-rate", "150")
	if code != exitOK || !strings.Contains(out, "write rate: limit 150 district writes/s (this writer's alone)") ||
		!strings.Contains(out, "started at 150/s, not the default 500/s: --max-write-rate is below it") {
		t.Errorf("exit %d, want 0 and the lowered start on the write rate line:\n%s%s", code, out, errs)
	}
	c.env["SNAPWRITER_MAX_WRITE_RATE"] = "150"
	code, out, errs = c.run(genJSON(t, "2026-11-21", 30), "write", "--input", "-", "--json")
	var res snapshot.Result
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || res.WriteRate.StartPerSec != 150 || res.WriteRate.LimitPerSec != 150 {
		t.Errorf("SNAPWRITER_MAX_WRITE_RATE=150 --json: exit %d, write rate %+v; want a start and limit of 150\n%s", code, res.WriteRate, errs)
	}
	// Without it the line says nothing of a start.
	code, out, _ = c.run(genJSON(t, "2026-11-22", 30), "write", "--input", "-", "--max-write-rate", "800", "--initial-write-rate", "500")
	if code != exitOK || strings.Contains(out, "started at") {
		t.Errorf("a start at or below the maximum: exit %d\n%s", code, out)
	}
}
