package readercontract

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"

	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/snapshot"
)

// A prune that failed midway (every delete of district 7 refused: its
// chunk fails, the others' districts are gone) leaves a root the
// application's readers no longer take as successful: its newest
// successful is the other snapshot, its list shows "failed" with no
// district, and getSnapshot returns no district (rather than failing on a
// district the manifest says is stored but is gone). snapwriter's Latest
// skips it and List says deleting. A rerun deletes it whole.
func TestPruneMidwayReaders(t *testing.T) {
	t.Parallel()
	c := newProject(t)
	ctx := context.Background()
	const date, newer, denied = "2026-11-19", "2026-11-20", "7"
	_, in := genInput(t, date, 120, 1)
	_, keep := genInput(t, newer, 10, 2)
	locker, err := firestorelock.New(c.client)
	if err != nil {
		t.Fatal(err)
	}
	// writer's chunks run through interceptors.
	writer := func(interceptors ...grpc.UnaryClientInterceptor) *snapshot.Writer {
		t.Helper()
		opts := []snapshot.Option{snapshot.WithLockWait(0), snapshot.WithRetryPolicy(fastPolicy()),
			snapshot.WithAPIClient(emu.TestAPIClient(t, interceptors...))}
		w, err := snapshot.NewWriter(c.client, locker, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := writer()
	if _, err := w.Write(ctx, date, in); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(ctx, newer, keep); err != nil {
		t.Fatal(err)
	}

	res, err := writer(denyDistrict(denied)).Prune(ctx, date)
	if err == nil || res == nil || !res.Marked || res.RootDeleted {
		t.Fatalf("prune with district %s's delete refused: %+v, %v; want marked, root kept, an error", denied, res, err)
	}
	if id, err := appLatestSuccessful(ctx, c.client); err != nil || id != newer {
		t.Errorf("application's newest successful = %q, %v; want %s", id, err, newer)
	}
	list, err := appList(ctx, c.client)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if e.DocID == date && (e.Status != "failed" || e.DistrictCount != 0 || e.WriteComplete) {
			t.Errorf("application list shows the snapshot being deleted as %+v; want status failed, 0 districts, writeComplete false", e)
		}
	}
	got, err := appGetSnapshot(ctx, c.client, date)
	if err != nil {
		t.Fatalf("application getSnapshot of the snapshot being deleted: %v", err)
	}
	if got == nil || len(got.Districts) != 0 {
		t.Errorf("application getSnapshot returns %v districts of a snapshot being deleted, want none", got)
	}
	for _, e := range got.Manifest {
		if e.Status != "failed" {
			t.Errorf("manifest entry %+v is not failed", e)
			break
		}
	}
	r := snapshot.NewReader(c.client, "")
	if id, err := r.Latest(ctx); err != nil || id != newer {
		t.Errorf("Latest = %q, %v; want %s", id, err, newer)
	}
	if s, err := r.Summary(ctx, date); err != nil || s.State != snapshot.StateDeleting {
		t.Errorf("Summary = %+v, %v; want state deleting", s, err)
	}

	if _, err := writer().Prune(ctx, date); err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if got, err := appGetSnapshot(ctx, c.client, date); err != nil || got != nil {
		t.Errorf("after the rerun the application still reads %s: %v, %v", date, got, err)
	}
	if _, err := r.Get(ctx, date); !errors.Is(err, snapshot.ErrNotFound) {
		t.Errorf("Get after the rerun: %v, want ErrNotFound", err)
	}
}
