package readercontract

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/internal/faultproxy"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/retry"
	"github.com/snapwriter/snapwriter/snapshot"
)

// Exit codes of the binary.
const (
	exitComplete = 0
	exitSIGTERM  = 143
)

// signalDistricts is the size of the writes interrupted by a signal: large
// enough (30 chunks) that a signal lands while chunks remain.
const signalDistricts = 1500

// proxyLatency slows the interrupted writes (each way, through
// internal/faultproxy), so that they are still writing when signalled.
const proxyLatency = 50 * time.Millisecond

// completeWant is what a complete write of in must look like.
func completeWant(in *model.Snapshot) want {
	return want{status: "success", writeComplete: true, newestSuccessful: true,
		districts: len(in.Payload.Districts), input: in,
		writeState: "finished", inputSnapshotID: in.SnapshotID}
}

// partialWant is what a write of in that stored only some districts must
// look like; writeState is "finished" when the writer recorded its
// outcome, "writing" when it was killed.
func partialWant(in *model.Snapshot, writeState string) want {
	return want{status: "partial", writeComplete: false, newestSuccessful: false,
		districts: -1, input: in, writeState: writeState, inputSnapshotID: in.SnapshotID}
}

// repaired runs `snapwriter repair --date D --input F` (exit 0) and checks
// the snapshot is complete and `get` returns the input (case 5).
func repaired(t *testing.T, c clientProject, date, path string, in *model.Snapshot, extra ...string) {
	t.Helper()
	mustRun(t, exitComplete, emu.Host, c.project, append([]string{"repair", "--date", date, "--input", path}, extra...)...)
	checkView(t, c.client, date, completeWant(in))
	getEquals(t, c.project, date, in)
}

// Case 1: a complete write by the binary.
func TestCompleteWrite(t *testing.T) {
	t.Parallel()
	c := newProject(t)
	const date = "2026-11-20"
	path, in := genInput(t, date, 60, 1)
	mustRun(t, exitComplete, emu.Host, c.project, "write", "--input", path, "--date", date)
	checkView(t, c.client, date, completeWant(in))
	ctx := context.Background()
	if id, err := appLatest(ctx, c.client); err != nil || id != date {
		t.Errorf("application newest snapshot: %q, %v; want %s", id, err, date)
	}
	// snapwriter's own documents (the fence document below the root) are
	// no snapshots to the application.
	if list, err := appList(ctx, c.client); err != nil || len(list) != 1 {
		t.Errorf("application list: %+v, %v; want the one snapshot", list, err)
	}
	getEquals(t, c.project, date, in)
}

// Case 2 (and 5): an in-process write whose chunk holding district 7 is
// refused for good: a partial snapshot, then repaired by the binary.
func TestPartialWrite(t *testing.T) {
	t.Parallel()
	c := newProject(t)
	const date, denied = "2026-11-20", "7"
	path, in := genInput(t, date, 120, 2)

	faulty := emu.TestClientFor(t, c.project, denyDistrict(denied))
	locker, err := firestorelock.New(c.client)
	if err != nil {
		t.Fatal(err)
	}
	w, err := snapshot.NewWriter(faulty, locker, snapshot.WithAPIClient(emu.TestAPIClient(t, denyDistrict(denied))),
		snapshot.WithLockWait(0), snapshot.WithRetryPolicy(fastPolicy()))
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.Write(context.Background(), date, in)
	if !errors.Is(err, snapshot.ErrPartial) || res == nil {
		t.Fatalf("Write: %v, want a partial result and ErrPartial", err)
	}
	if res.Outcome != snapshot.OutcomePartial {
		t.Fatalf("Write: outcome %v, not partial, although every commit of district %s was refused", res.Outcome, denied)
	}
	if !slices.Contains(res.FailedDistricts, denied) {
		t.Errorf("Result.FailedDistricts %v does not name district %s", res.FailedDistricts, denied)
	}
	v := checkView(t, c.client, date, partialWant(in, "finished"))
	if v.present[denied] {
		t.Errorf("district %s is stored although every commit of it was refused", denied)
	}
	if len(v.present) == 0 {
		t.Errorf("no district stored: only the chunk of district %s was refused", denied)
	}
	if v.metadata == nil {
		return
	}
	t.Run("repair", func(t *testing.T) { repaired(t, c, date, path, in) })
}

// Case 3 (and 5): a binary write of 1,500 districts, slowed by a proxy,
// stopped by SIGTERM once a chunk is committed: exit 143 (128+SIGTERM;
// the manifest says partial), the root records
// exactly what was stored; repair completes it.
func TestSIGTERMWrite(t *testing.T) {
	t.Parallel()
	c := newProject(t)
	const date = "2026-11-20"
	path, in := genInput(t, date, signalDistricts, 3)
	code, sig, v := interrupted(t, c, date, path, in, syscall.SIGTERM, partialWant(in, "finished"))
	if code != exitSIGTERM || sig != 0 {
		t.Errorf("after SIGTERM: exit %d (signal %v), want exit %d", code, sig, exitSIGTERM)
	}
	if v.metadata == nil {
		return
	}
	t.Run("repair", func(t *testing.T) { repaired(t, c, date, path, in) })
}

// Case 4 (and 5): the same write killed by SIGKILL once a chunk is
// committed. Nobody records an outcome: the root, which says writing,
// must already satisfy every invariant as the application reads it — it
// lists only districts whose document is stored — with the districts it
// does not record "failed" / "not written yet". Those the writer stored
// but had not recorded yet (it records progress at most once per
// --record-interval) carry the root's writerFence; the application does
// not see them until repair records them. The killed write holds a 3 s
// lock; repair waits for it and for any transaction the killed writer left
// open (Firestore ends it within 60 s).
func TestSIGKILLWrite(t *testing.T) {
	t.Parallel()
	c := newProject(t)
	const date = "2026-11-20"
	path, in := genInput(t, date, signalDistricts, 4)
	w := partialWant(in, "writing")
	w.unwrittenMessage = "not written yet"
	_, sig, v := interrupted(t, c, date, path, in, syscall.SIGKILL, w, "--lock-ttl", "3s")
	if sig != syscall.SIGKILL {
		t.Errorf("the write was not ended by SIGKILL (signal %v)", sig)
	}
	t.Logf("after the kill: %d district documents, %d of them written but not yet recorded", len(v.present), len(v.unrecorded))
	if v.metadata == nil {
		return
	}
	t.Run("repair", func(t *testing.T) { repaired(t, c, date, path, in, "--lock-wait", "90s") })
}

// interrupted runs `snapwriter write` of in through a slow proxy, sends sig
// once the first district chunk is logged as committed, and checks the
// snapshot it left against w. It returns the exit code, the signal that
// ended the process and the view (whose metadata is nil when there is no
// root to repair).
func interrupted(t *testing.T, c clientProject, date, path string, in *model.Snapshot, sig syscall.Signal, w want, extra ...string) (int, syscall.Signal, view) {
	t.Helper()
	proxy, err := faultproxy.New(emu.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	proxy.SetLatency(proxyLatency)

	var once sync.Once
	signalled := false // set by the goroutine reading the log, read after it ended
	p := startBin(t, proxy.Addr(), c.project, func(p *proc, l logLine) {
		// Batch 0 is the root; a committed batch ≥ 1 is a district chunk,
		// which never starts before the root is committed.
		if l.message() == "batch committed" && l.batchIndex() >= 1 {
			once.Do(func() {
				p.signal(sig)
				signalled = true
			})
		}
	}, append([]string{"write", "--input", path, "--date", date}, extra...)...)
	code, ended := p.wait(t)
	// Bytes the dead or finished writer left in the proxy are dropped:
	// what is stored from now on is what the write stored.
	proxy.Close()
	if !signalled {
		t.Fatalf("the write ended (exit %d) before any district chunk was logged as committed\n%s", code, tail(p.logs()))
	}
	how := fmt.Sprintf("exit %d", code)
	if ended != 0 {
		how = "ended by " + ended.String()
	}
	t.Logf("%v sent after the first committed chunk; %s", sig, how)
	v := checkView(t, c.client, date, w)
	if n := len(v.present); v.metadata != nil && (n == 0 || n == len(in.Payload.Districts)) {
		t.Errorf("%d of %d districts stored: the %v did not land mid-write (slow the write further)", n, len(in.Payload.Districts), sig)
	}
	t.Logf("%d of %d districts stored when the write ended", len(v.present), len(in.Payload.Districts))
	if t.Failed() {
		t.Logf("writer's log:\n%s", tail(p.logs()))
	}
	return code, ended, v
}

// Case 6 (and 5): a snapshot the TypeScript application wrote, 82 of 132
// districts stored, with status "success" and writeComplete false (the
// application's own writer forgot the status change). The application's
// readers show it as it is; snapwriter's `get --date latest` must skip it
// for the older complete snapshot; repair then completes it.
func TestApplicationWrittenSnapshot(t *testing.T) {
	t.Parallel()
	c := newProject(t)
	ctx := context.Background()
	const older, date = "2026-11-19", "2026-11-20"
	oldPath, oldIn := genInput(t, older, 20, 5)
	mustRun(t, exitComplete, emu.Host, c.project, "write", "--input", oldPath, "--date", older)

	path, in := genInput(t, date, 132, 6)
	if in.SnapshotID == date {
		t.Fatalf("the generated input's snapshot_id is the date %s: the case needs one that is not", date)
	}
	var ids []string
	for _, d := range in.Payload.Districts {
		ids = append(ids, d.DistrictID)
	}
	root, docs := appFixture(date, in, ids[:82], "success", false)
	putFixture(t, c.client, date, root, docs)

	// The application's view of its own data.
	checkView(t, c.client, date, want{status: "success", writeComplete: false, newestSuccessful: true, districts: 82, input: in})
	list, err := appList(ctx, c.client)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].DocID != date || list[1].DocID != older {
		t.Errorf("application list: %+v, want %s then %s", list, date, older)
	} else if l := list[1]; l.SnapshotID != older || l.Status != "success" || !l.WriteComplete || l.DistrictCount != 20 {
		t.Errorf("application list shows the older snapshot as %+v", l)
	}
	if id, err := appLatest(ctx, c.client); err != nil || id != date {
		t.Errorf("application newest snapshot: %q, %v; want %s", id, err, date)
	}

	// snapwriter's newest successful snapshot is the older, complete one.
	o := runBin(t, emu.Host, c.project, "get", "--date", "latest", "--compact")
	if o.code != exitComplete {
		t.Errorf("get --date latest --json: exit %d, want %d (the older snapshot is complete)\n%s", o.code, exitComplete, tail(o.stderr))
	}
	got, err := model.Decode(strings.NewReader(o.stdout))
	switch {
	case err != nil:
		t.Errorf("get --date latest --json: output does not decode: %v", err)
	case got.Payload.Metadata.DataAsOfDate != older:
		t.Errorf("get --date latest returned the snapshot of %s (snapshot_id %s), want the older complete one of %s",
			got.Payload.Metadata.DataAsOfDate, got.SnapshotID, older)
	default:
		if d := model.Diff(oldIn, got); d != "" {
			t.Errorf("get --date latest differs from the older input: %s", d)
		}
	}

	t.Run("repair", func(t *testing.T) {
		repaired(t, c, date, path, in)
		o := mustRun(t, exitComplete, emu.Host, c.project, "get", "--date", "latest", "--compact")
		got, err := model.Decode(strings.NewReader(o.stdout))
		if err != nil {
			t.Fatalf("get --date latest --json: output does not decode: %v", err)
		}
		if d := model.Diff(in, got); d != "" {
			t.Errorf("after repair, get --date latest is not the repaired snapshot: %s", d)
		}
		list, err := appList(ctx, c.client)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].DocID != date || list[0].DistrictCount != 132 || !list[0].WriteComplete {
			t.Errorf("application list after repair: %+v", list)
		}
	})
}

// clientProject is a test's emulator project and a plain client on it.
type clientProject struct {
	project string
	client  *firestore.Client
}

func newProject(t *testing.T) clientProject {
	project := emulator.ProjectID(t)
	return clientProject{project: project, client: emu.TestClientFor(t, project)}
}

// denyDistrict refuses, for good (PERMISSION_DENIED), every Commit that
// sets or deletes district id's document: its chunk fails.
func denyDistrict(id string) grpc.UnaryClientInterceptor {
	suffix := "/districts/district_" + id
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if cr, ok := req.(*firestorepb.CommitRequest); ok && method == "/google.firestore.v1.Firestore/Commit" {
			for _, w := range cr.GetWrites() {
				name := w.GetDelete()
				if u := w.GetUpdate(); u != nil {
					name = u.GetName()
				}
				if strings.HasSuffix(name, suffix) {
					return status.Error(codes.PermissionDenied, "injected: district "+id+" refused")
				}
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// fastPolicy is the default retry policy with millisecond backoffs.
func fastPolicy() retry.Policy {
	p := retry.DefaultPolicy()
	p.Initial, p.Max = 5*time.Millisecond, 40*time.Millisecond
	p.AttemptTimeout, p.TotalTimeout = 20*time.Second, time.Minute
	return p
}
