package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/snapshot"
)

// commitHook is an interceptor that runs fn on every Commit before it is sent.
func commitHook(fn func(ctx context.Context, cr *firestorepb.CommitRequest) error) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if cr, ok := req.(*firestorepb.CommitRequest); ok {
			if err := fn(ctx, cr); err != nil {
				return err
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// denyDistrict fails every commit that writes district id, permanently.
func denyDistrict(id string) grpc.UnaryClientInterceptor {
	return commitHook(func(_ context.Context, cr *firestorepb.CommitRequest) error {
		for _, w := range cr.GetWrites() {
			if strings.HasSuffix(w.GetUpdate().GetName(), "/district_"+id) {
				return status.Error(codes.PermissionDenied, "injected")
			}
		}
		return nil
	})
}

// writePartial writes in with every commit of district 7 refused and no
// retries: a partial snapshot (exit 3) whose manifest records the failure.
func (c *cli) writePartial(in string) {
	c.t.Helper()
	c.env["SNAPWRITER_MAX_RETRIES"] = "0"
	c.interceptors = []grpc.UnaryClientInterceptor{denyDistrict("7")}
	defer func() {
		c.interceptors = nil
		delete(c.env, "SNAPWRITER_MAX_RETRIES")
	}()
	if code, _, errs := c.run(in, "write", "--input", "-"); code != exitPartial {
		c.t.Fatalf("partial write: exit %d, want 3\n%s", code, errs)
	}
}

// writesDistricts reports whether a commit writes district documents.
func writesDistricts(cr *firestorepb.CommitRequest) bool {
	for _, w := range cr.GetWrites() {
		if strings.Contains(w.GetUpdate().GetName()+w.GetDelete(), "/districts/") {
			return true
		}
	}
	return false
}

// writesRoot reports whether a commit writes the snapshot's root document.
func writesRoot(cr *firestorepb.CommitRequest) bool {
	for _, w := range cr.GetWrites() {
		if name := w.GetUpdate().GetName(); name != "" && strings.HasSuffix(name, "/snapshots/"+day) {
			return true
		}
	}
	return false
}

// A writer whose lease ends mid-write, with no newer writer, exits 3 with
// "lost the lock"; its manifest is recorded and exact, and repair completes it.
func TestLockLostExit3(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	in := genJSON(t, day, 150)
	var chunks atomic.Int32
	c.interceptors = []grpc.UnaryClientInterceptor{commitHook(func(ctx context.Context, cr *firestorepb.CommitRequest) error {
		if !writesDistricts(cr) || chunks.Add(1) != 1 {
			return nil
		}
		// The first chunk: the lock disappears and the commit stalls until
		// the heartbeat finds the lock gone, which ends the write's work
		// (and this commit's) context.
		if _, err := c.client().Collection("locks").Doc(c.snapKey("firestore", day)).Delete(context.Background()); err != nil {
			t.Error(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
			t.Error("the lease was not lost within 30 s of its lock's deletion")
		}
		return nil
	})}
	code, out, errs := c.run(in, "write", "--input", "-", "--json", "--lock-ttl", "1s", "--concurrency", "1")
	if code != exitPartial || !strings.Contains(errs, "lost the lock") || strings.Contains(errs, "fenced out") {
		t.Fatalf("exit %d, want 3 with \"lost the lock\"\n%s\n%s", code, out, errs)
	}
	var res snapshot.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.LockRenewals.Lost || res.Outcome != snapshot.OutcomePartial {
		t.Fatalf("result %+v, %v", res, err)
	}
	// The JSON still says it with the booleans it always had.
	for _, kv := range []string{`"outcome": "partial"`, `"complete": false`, `"manifestRecorded": true`, `"lockLost": true`} {
		if !strings.Contains(out, kv) {
			t.Errorf("--json lacks %s:\n%s", kv, out)
		}
	}
	written, failed := manifestExact(t, c, day)
	if written+failed != 150 || written != res.DistrictsWritten {
		t.Errorf("manifest %d/%d, result says %d written", written, failed, res.DistrictsWritten)
	}
	c.interceptors = nil
	if code, _, errs := c.run(in, "repair", "--date", day, "--input", "-"); code != exitOK {
		t.Fatalf("repair: exit %d\n%s", code, errs)
	}
	checkRoundTrip(t, c, in)
}

// A finish that cannot be recorded: exit 1, stderr and the ERROR log say the
// manifest was not recorded and that repair completes it.
func TestManifestNotRecordedExit1(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	in := genJSON(t, day, 60)
	var roots atomic.Int32
	c.interceptors = []grpc.UnaryClientInterceptor{commitHook(func(_ context.Context, cr *firestorepb.CommitRequest) error {
		if writesRoot(cr) && roots.Add(1) > 1 {
			return status.Error(codes.PermissionDenied, "injected")
		}
		return nil
	})}
	code, out, errs := c.run(in, "write", "--input", "-", "--json")
	if code != exitError || !strings.Contains(errs, "manifest was not recorded") || !strings.Contains(errs, "repair") ||
		!strings.Contains(errs, `"severity":"ERROR"`) {
		t.Fatalf("exit %d, want 1 saying the manifest was not recorded\n%s", code, errs)
	}
	var res snapshot.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Outcome != snapshot.OutcomeNotRecorded ||
		!strings.Contains(out, `"manifestRecorded": false`) || !strings.Contains(out, `"outcome": "notRecorded"`) {
		t.Fatalf("result %+v, %v\n%s", res, err, out)
	}
	c.interceptors = nil
	if code, _, errs := c.run(in, "repair", "--date", day, "--input", "-"); code != exitOK {
		t.Fatalf("repair: exit %d\n%s", code, errs)
	}
	checkRoundTrip(t, c, in)
}
