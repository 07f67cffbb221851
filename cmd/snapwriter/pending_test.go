package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// listed runs list --json and returns the summary of day.
func listed(t *testing.T, c *cli) snapshot.Summary {
	t.Helper()
	code, out, errs := c.run("", "list", "--json")
	var list []snapshot.Summary
	if code != exitOK || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("list --json: exit %d\n%s\n%s", code, out, errs)
	}
	for _, s := range list {
		if s.SnapshotID == day {
			return s
		}
	}
	t.Fatalf("list --json does not list %s:\n%s", day, out)
	return snapshot.Summary{}
}

// columns are the DISTRICTS, FAILED and PENDING columns of day's row in
// list's text output.
func columns(t *testing.T, out string) []string {
	t.Helper()
	f := strings.Fields(row(out, day))
	if len(f) != 7 {
		t.Fatalf("row of %s: %q, want 7 columns\n%s", day, row(out, day), out)
	}
	return f[3:6]
}

// list, get and verify of a write held midway — one chunk refused, one
// stalled in its commit, the rest not reached — say which districts
// failed and which are pending (before, list counted every district not
// written as failed: "writing  partial  300  200"); once its writer is
// dead, the pending ones are those it never reached; after a repair,
// nothing is pending.
func TestListGetVerifyPending(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	in := genJSON(t, day, 300)
	ids := make([]string, 0, 300)
	for _, d := range model.Generate(day, 300, 1).Payload.Districts {
		ids = append(ids, d.DistrictID)
	}
	failed, pending := ids[100:150], ids[150:]
	has := func(cr *firestorepb.CommitRequest, id string) bool {
		for _, w := range cr.GetWrites() {
			if strings.HasSuffix(w.GetUpdate().GetName(), "/district_"+id) {
				return true
			}
		}
		return false
	}
	held, release := make(chan struct{}), make(chan struct{})
	goOn := sync.OnceFunc(func() { close(release) })
	t.Cleanup(goOn)
	recorded := make(chan struct{}, 1)
	var dead atomic.Bool // the writer is dead: nothing it commits lands
	var once sync.Once
	c.interceptors = []grpc.UnaryClientInterceptor{
		commitHook(func(_ context.Context, cr *firestorepb.CommitRequest) error {
			switch {
			case dead.Load() && (writesRoot(cr) || writesDistricts(cr)):
				return status.Error(codes.PermissionDenied, "injected: the writer is dead")
			case has(cr, ids[100]):
				return status.Error(codes.PermissionDenied, "injected")
			case has(cr, ids[150]):
				once.Do(func() {
					close(held)
					select {
					case <-release:
					case <-time.After(time.Minute):
						t.Error("the held chunk was never released")
					}
				})
			}
			return nil
		}),
		// Signals every commit of the root that landed.
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if cr, ok := req.(*firestorepb.CommitRequest); ok && err == nil && writesRoot(cr) {
				select {
				case recorded <- struct{}{}:
				default:
				}
			}
			return err
		},
	}
	wrote := make(chan int, 1)
	go func() {
		code, _, _ := c.run(in, "write", "--input", "-", "--concurrency", "1", "--batch-size", "50",
			"--max-retries", "0", "--record-interval", "100ms")
		wrote <- code
	}()
	select {
	case <-held:
	case code := <-wrote:
		t.Fatalf("the write ended (exit %d) before its fourth chunk", code)
	case <-time.After(time.Minute):
		t.Fatal("the fourth chunk was not reached within a minute")
	}
	guard := time.After(time.Minute)
	for len(listed(t, c).FailedDistricts) == 0 {
		select {
		case <-recorded:
		case <-guard:
			t.Fatal("the refused chunk was not recorded within a minute")
		}
	}

	// A writer at work.
	s := listed(t, c)
	if s.State != snapshot.StateWriting || !slices.Equal(s.FailedDistricts, failed) || !slices.Equal(s.PendingDistricts, pending) {
		t.Errorf("list --json while writing: %s, %d failed, %d pending; want writing, 50 failed, 150 pending", s.State, len(s.FailedDistricts), len(s.PendingDistricts))
	}
	first10 := strings.Join(failed[:10], ", ") + " … and 40 more; --json lists them all"
	out := listText(t, c)
	if got := columns(t, out); !slices.Equal(got, []string{"300", "50", "150"}) {
		t.Errorf("list while writing: DISTRICTS FAILED PENDING %v, want 300 50 150\n%s", got, out)
	}
	if want := day + " writing: a writer is at work: 100 of 300 districts written, 50 failed (" + first10 + "), 150 pending"; !strings.Contains(out, want) {
		t.Errorf("list does not say %q:\n%s", want, out)
	}
	code, _, errs := c.run("", "get", "--date", day)
	if want := "snapshot " + day + " is writing: the output holds the 100 of its 300 districts that are stored; 50 failed (" + first10 + "), 150 pending (not reached yet); a writer is at work"; code != exitPartial || !strings.Contains(errs, want) {
		t.Errorf("get while writing: exit %d, want 3 saying %q\n%s", code, want, errs)
	}
	code, out, errs = c.run("", "verify", "--date", day)
	for _, want := range []string{"300 districts, 100 written, 50 failed, 150 pending", "  failed (50): " + first10, "  pending (150): " + strings.Join(pending[:10], ", ") + " … and 140 more; --json lists them all"} {
		if code != exitPartial || !strings.Contains(out, want) {
			t.Errorf("verify while writing: exit %d, want 3 saying %q\n%s%s", code, want, out, errs)
		}
	}
	if want := "intact so far, 100 of 300 districts written, 50 failed (" + first10 + "), 150 pending (not reached yet); a writer is at work"; !strings.Contains(errs, want) {
		t.Errorf("verify while writing does not say %q:\n%s", want, errs)
	}
	code, out, _ = c.run("", "verify", "--date", day, "--json")
	var rep snapshot.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitPartial ||
		!slices.Equal(rep.FailedDistricts, failed) || !slices.Equal(rep.PendingDistricts, pending) {
		t.Errorf("verify --json while writing: exit %d, %d failed, %d pending, %v; want 50 and 150\n%s", code, len(rep.FailedDistricts), len(rep.PendingDistricts), err, out)
	}

	// The writer dies: what it writes from now on never lands.
	dead.Store(true)
	goOn()
	if code := <-wrote; code != exitError {
		t.Fatalf("the dying write: exit %d, want 1 (manifest not recorded)", code)
	}
	c.interceptors = nil
	s = listed(t, c)
	if s.State != snapshot.StateInterrupted || !slices.Equal(s.FailedDistricts, failed) || !slices.Equal(s.PendingDistricts, pending) {
		t.Errorf("list --json of the dead write: %s, %d failed, %d pending; want interrupted, 50 failed, 150 pending", s.State, len(s.FailedDistricts), len(s.PendingDistricts))
	}
	out = listText(t, c)
	if want := day + " interrupted: its writer died (no live lock) after writing 100 of 300 districts; 50 failed (" + first10 + "), 150 pending (never reached"; !strings.Contains(out, want) {
		t.Errorf("list does not say %q:\n%s", want, out)
	}
	code, _, errs = c.run("", "get", "--date", day)
	if want := "is interrupted: the output holds the 100 of its 300 districts that are stored; 50 failed (" + first10 + "), 150 pending (never reached"; code != exitPartial || !strings.Contains(errs, want) {
		t.Errorf("get of the dead write: exit %d, want 3 saying %q\n%s", code, want, errs)
	}

	if code, _, errs := c.run(in, "repair", "--date", day, "--input", "-"); code != exitOK {
		t.Fatalf("repair: exit %d\n%s", code, errs)
	}
	if s := listed(t, c); s.State != snapshot.StateComplete || len(s.FailedDistricts)+len(s.PendingDistricts) != 0 {
		t.Errorf("after repair: %s, %d failed, %d pending", s.State, len(s.FailedDistricts), len(s.PendingDistricts))
	}
	if got := columns(t, listText(t, c)); !slices.Equal(got, []string{"300", "0", "0"}) {
		t.Errorf("list after repair: DISTRICTS FAILED PENDING %v, want 300 0 0", got)
	}
}
