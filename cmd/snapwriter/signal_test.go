package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// manifestExact checks that the stored manifest of date says success for
// exactly the districts whose documents exist, and returns the counts.
func manifestExact(t *testing.T, c *cli, date string) (written, failed int) {
	t.Helper()
	ctx := context.Background()
	root := c.client().Collection("snapshots").Doc(date)
	doc, err := root.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := root.Collection("districts").Documents(ctx).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, d := range docs {
		stored[strings.TrimPrefix(d.Ref.ID, "district_")] = true
	}
	mf, _ := doc.Data()["manifest"].(map[string]any)
	for _, x := range mf["districts"].([]any) {
		e := x.(map[string]any)
		id := e["districtId"].(string)
		switch e["status"] {
		case "success":
			written++
			if !stored[id] {
				t.Errorf("district %s: manifest says success, no document", id)
			}
		case "failed":
			failed++
			if stored[id] {
				t.Errorf("district %s: manifest says failed, document exists", id)
			}
		default:
			t.Errorf("district %s: status %v after the write ended", id, e["status"])
		}
	}
	return written, failed
}

// SIGTERM in the middle of a large write: chunks stop, the manifest is
// partial and exact, the lock is released, exit 143 (128+SIGTERM: the
// manifest and the result say partial); repair completes it.
func TestSIGTERMDuringWrite(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	in := genJSON(t, day, 1000)
	file := writeFile(t, day+".json", in)
	t0 := time.Now()
	bin := binary(t)
	t.Logf("build %s", time.Since(t0))
	cmd := exec.Command(bin, "write", "--input", file, "--concurrency", "1", "--json")
	cmd.Env = binaryEnv(c.project)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, sc, logs := startLogged(t, cmd)
	// Signal once two district chunks have committed.
	if !scanCommitted(sc, 3) {
		t.Fatalf("the write ended before two chunks committed:\n%s", logs.String())
	}
	t.Logf("signal at %s", time.Since(t0))
	if code := sigterm(t, cmd, stderr, logs); code != 143 {
		t.Fatalf("exit %d, want 143\n%s", code, logs.String())
	}
	var res snapshot.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.Outcome != snapshot.OutcomePartial || res.DistrictsWritten < 100 || res.DistrictsWritten >= 1000 {
		t.Fatalf("result %+v, %v", res, err)
	}
	t.Logf("exited at %s", time.Since(t0))
	written, failed := manifestExact(t, c, day)
	t.Logf("manifest checked at %s", time.Since(t0))
	if written != res.DistrictsWritten || written+failed != 1000 {
		t.Errorf("manifest: %d written, %d failed; result says %d written", written, failed, res.DistrictsWritten)
	}
	if locks := docsIn(t, c, "locks"); len(locks) != 0 {
		t.Errorf("lock left behind: %v", locks)
	}
	if !strings.Contains(logs.String(), "not attempted") {
		t.Errorf("logs do not say which chunks were not attempted")
	}

	// Repair and read back through the binary too: the race detector
	// would make 1,000 districts crawl in process.
	repair := exec.Command(bin, "repair", "--date", day, "--input", file, "--json")
	repair.Env = binaryEnv(c.project)
	out, err := repair.Output()
	if err != nil {
		t.Fatalf("repair: %v\n%s", err, out)
	}
	var rep snapshot.Result
	if err := json.Unmarshal(out, &rep); err != nil || rep.Outcome != snapshot.OutcomeComplete || rep.DistrictsWritten != failed {
		t.Errorf("repair result %+v, %v; want %d districts", rep, err, failed)
	}
	t.Logf("repaired at %s", time.Since(t0))
	get := exec.Command(bin, "get", "--date", day)
	get.Env = binaryEnv(c.project)
	back, err := get.Output()
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	t.Logf("read back at %s", time.Since(t0))
	a, _ := model.Decode(strings.NewReader(in))
	b, err := model.Decode(bytes.NewReader(back))
	if err != nil || !model.Equal(a, b) {
		t.Errorf("repaired snapshot differs from the input: %v", err)
	}
	t.Logf("repaired and read back at %s", time.Since(t0))
}

// checkRoundTrip asserts that `get` returns the input.
func checkRoundTrip(t *testing.T, c *cli, in string) {
	t.Helper()
	code, out, errs := c.run("", "get", "--date", day)
	if code != exitOK {
		t.Fatalf("get: exit %d\n%s", code, errs)
	}
	a, _ := model.Decode(strings.NewReader(in))
	b, err := model.Decode(strings.NewReader(out))
	if err != nil || !model.Equal(a, b) {
		t.Errorf("stored snapshot differs from the input: %v %s", err, model.Diff(a, b))
	}
}

// A snapshot made partial by injected permanent failures becomes complete
// and equal to the input after `repair`; a second repair is a no-op.
func TestRepairCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SNAPWRITER_MAX_RETRIES"] = "0"
	in := genJSON(t, day, 160)
	c.interceptors = []grpc.UnaryClientInterceptor{func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if cr, ok := req.(*firestorepb.CommitRequest); ok {
			for _, w := range cr.GetWrites() {
				name := w.GetUpdate().GetName()
				if strings.HasSuffix(name, "/district_7") || strings.HasSuffix(name, "/district_120") {
					return status.Error(codes.PermissionDenied, "injected")
				}
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}}
	if code, _, errs := c.run(in, "write", "--input", "-"); code != exitPartial {
		t.Fatalf("write: exit %d, want 3\n%s", code, errs)
	}
	c.interceptors = nil
	if w, f := manifestExact(t, c, day); w != 60 || f != 100 {
		t.Fatalf("partial manifest: %d written, %d failed", w, f)
	}
	file := writeFile(t, "in.json", in)

	// The wrong input is refused before anything is written.
	if code, _, errs := c.run("", "repair", "--date", day, "--input", writeFile(t, "other.json", genJSON(t, day, 161))); code != exitUsage || !strings.Contains(errs, "does not match") {
		t.Errorf("repair with other input: exit %d\n%s", code, errs)
	}
	code, out, errs := c.run("", "repair", "--date", day, "--input", file)
	if code != exitOK || !strings.Contains(out, "complete") {
		t.Fatalf("repair: exit %d\n%s\n%s", code, out, errs)
	}
	if w, f := manifestExact(t, c, day); w != 160 || f != 0 {
		t.Errorf("after repair: %d written, %d failed", w, f)
	}
	checkRoundTrip(t, c, in)
	if code, out, _ := c.run("", "list"); code != exitOK || !strings.Contains(out, "complete") || strings.Contains(out, "partial") {
		t.Errorf("list after repair:\n%s", out)
	}
	code, out, errs = c.run("", "repair", "--date", day, "--input", file)
	if code != exitOK || !strings.Contains(out, "already complete") {
		t.Errorf("second repair: exit %d\n%s\n%s", code, out, errs)
	}
	// A writer killed before its root leaves nothing: repair writes it all.
	if code, _, errs := c.run("", "repair", "--date", "2026-01-01", "--input", writeFile(t, "x.json", genJSON(t, "2026-01-01", 3))); code != exitOK || !strings.Contains(errs, "writing the whole snapshot") {
		t.Errorf("repair of a missing snapshot: exit %d\n%s", code, errs)
	}
}

func TestGetDistrict(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	in := genJSON(t, day, 5)
	if code, _, errs := c.run(in, "write", "--input", "-"); code != exitOK {
		t.Fatalf("write: %d %s", code, errs)
	}
	snap, _ := model.Decode(strings.NewReader(in))
	want := snap.Payload.Districts[2]
	code, out, errs := c.run("", "get", "--date", day, "--district", want.DistrictID)
	if code != exitOK {
		t.Fatalf("get --district: exit %d\n%s", code, errs)
	}
	got, err := model.DecodeObject(strings.NewReader(out))
	wb, _ := model.Marshal(memData(want))
	gb, _ := model.Marshal(got)
	if err != nil || !bytes.Equal(wb, gb) {
		t.Errorf("get --district printed %s, want district %s", out, want.DistrictID)
	}
	if code, _, errs := c.run("", "get", "--date", day, "--district", "nope"); code != exitError || !strings.Contains(errs, "has no district nope") {
		t.Errorf("unknown district: exit %d\n%s", code, errs)
	}
}

// Every command explains itself with examples, and `version` works.
func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	a := newApp(strings.NewReader(""), io.Discard, io.Discard, func(string) (string, bool) { return "", false })
	var walk func(cmds []*cobra.Command)
	walk = func(cmds []*cobra.Command) {
		for _, c := range cmds {
			if c.Name() == "help" || c.Name() == "completion" {
				continue
			}
			if c.Example == "" || c.Short == "" {
				t.Errorf("command %q has no example or short help", c.CommandPath())
			}
			walk(c.Commands())
		}
	}
	walk(a.rootCommand().Commands())

	c := newCLI(t)
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, _ := c.run("", args...)
		if code != exitOK || !strings.HasPrefix(out, "snapwriter ") || !strings.Contains(out, "go1.") {
			t.Errorf("%v: exit %d %q", args, code, out)
		}
	}
}
