package firestorelock

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/backendkit"
	"github.com/snapwriter/snapwriter/locking/internal/closetest"
)

func getDoc(t *testing.T, c *firestore.Client, coll, id string) *firestore.DocumentSnapshot {
	t.Helper()
	snap, err := c.Collection(coll).Doc(id).Get(context.Background())
	if err != nil {
		t.Fatalf("%s/%s: %v", coll, id, err)
	}
	return snap
}

func docExists(t *testing.T, c *firestore.Client, coll, id string) bool {
	t.Helper()
	_, err := c.Collection(coll).Doc(id).Get(context.Background())
	return err == nil
}

// Raw lookups return the stored key and lockId beside the sanitized info,
// read only, and nil when there is no live lock.
func TestDebugLookups(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now()}
	b, c := newBackend(t, WithClock(clk.Now))
	ctx := context.Background()
	r := mustAcquire(t, b, "cafe\u0301", 10*time.Second)
	before := getDoc(t, c, DefaultLockCollection, "caf\u00e9").UpdateTime

	info, err := locking.GetByKey(ctx, b, "caf\u00e9")
	if err != nil || info == nil {
		t.Fatal(info, err)
	}
	byKey, err := locking.GetByKeyRaw(ctx, b, "caf\u00e9")
	if err != nil || byKey == nil || byKey.Key != "cafe\u0301" || byKey.LockID != r.LockID || byKey.LockInfo != *info {
		t.Errorf("GetByKeyRaw = %+v, %v; info %+v", byKey, err, info)
	}
	byID, err := locking.GetByIDRaw(ctx, b, r.LockID)
	if err != nil || byID == nil || *byID != *byKey {
		t.Errorf("GetByIDRaw = %+v, %v", byID, err)
	}
	if byID != nil && (byID.Fence != r.Fence || byID.ExpiresAt.UnixMilli() != r.ExpiresAt.UnixMilli() || byID.LockIDHash != locking.HashKey(r.LockID)) {
		t.Errorf("GetByIDRaw info %+v for %+v", byID.LockInfo, r)
	}
	if owned, err := locking.Owns(ctx, b, r.LockID); !owned || err != nil {
		t.Errorf("Owns = %v, %v", owned, err)
	}
	if got := getDoc(t, c, DefaultLockCollection, "caf\u00e9").UpdateTime; !got.Equal(before) {
		t.Errorf("lookups wrote the lock document: update time %v, was %v", got, before)
	}

	// Validation before I/O, as the sanitized lookups.
	if _, err := b.LookupLockIDDebug(ctx, "short"); !errors.Is(err, locking.ErrInvalidArgument) {
		t.Errorf("bad lockId: %v", err)
	}
	if _, err := b.LookupKeyDebug(ctx, "a/b"); !errors.Is(err, locking.ErrInvalidArgument) {
		t.Errorf("bad key: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.LookupKeyDebug(cctx, "caf\u00e9"); !errors.Is(err, locking.ErrAborted) {
		t.Errorf("cancelled: %v", err)
	}

	foreign, _ := backendkit.NewLockID()
	if got, err := b.LookupLockIDDebug(ctx, foreign); got != nil || err != nil {
		t.Errorf("unknown lockId: %+v, %v", got, err)
	}
	if got, err := b.LookupKeyDebug(ctx, "nothing-here"); got != nil || err != nil {
		t.Errorf("unknown key: %+v, %v", got, err)
	}
	clk.Advance(10*time.Second + locking.TimeTolerance)
	if got, err := b.LookupKeyDebug(ctx, "caf\u00e9"); got != nil || err != nil {
		t.Errorf("expired, by key: %+v, %v", got, err)
	}
	if got, err := b.LookupLockIDDebug(ctx, r.LockID); got != nil || err != nil {
		t.Errorf("expired, by lockId: %+v, %v", got, err)
	}
}

// Release and extend say why they failed, from what they read anyway.
func TestFailureReasons(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now()}
	b, _ := newBackend(t, WithClock(clk.Now))
	ctx := context.Background()
	r := mustAcquire(t, b, "k", 10*time.Second)
	foreign, _ := backendkit.NewLockID()
	if ok, why, err := b.ReleaseWithReason(ctx, foreign); ok || why != locking.ReasonNotFound || err != nil {
		t.Errorf("release unknown: %v %q %v", ok, why, err)
	}
	if e, why, err := b.ExtendWithReason(ctx, foreign, time.Minute); e.OK || why != locking.ReasonNotFound || err != nil {
		t.Errorf("extend unknown: %+v %q %v", e, why, err)
	}
	if e, why, err := b.ExtendWithReason(ctx, r.LockID, 10*time.Second); !e.OK || why != "" || err != nil {
		t.Errorf("extend live: %+v %q %v", e, why, err)
	}
	clk.Advance(10*time.Second + locking.TimeTolerance)
	if e, why, err := b.ExtendWithReason(ctx, r.LockID, time.Minute); e.OK || why != locking.ReasonExpired || err != nil {
		t.Errorf("extend expired: %+v %q %v", e, why, err)
	}
	if ok, why, err := b.ReleaseWithReason(ctx, r.LockID); ok || why != locking.ReasonExpired || err != nil {
		t.Errorf("release expired: %v %q %v", ok, why, err)
	}
	r2 := mustAcquire(t, b, "k", 10*time.Second)
	if ok, why, err := b.ReleaseWithReason(ctx, r2.LockID); !ok || why != "" || err != nil {
		t.Errorf("release live: %v %q %v", ok, why, err)
	}
	if ok, why, err := b.ReleaseWithReason(ctx, r2.LockID); ok || why != locking.ReasonNotFound || err != nil {
		t.Errorf("second release: %v %q %v", ok, why, err)
	}
}

// The telemetry decorator on Firestore: reasons come through, and the raw
// lookups and the keyed shortcut stay reachable.
func TestTelemetryOnFirestore(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now()}
	fb, _ := newBackend(t, WithClock(clk.Now))
	events := make(chan locking.Event, 16)
	b := locking.WithTelemetry(fb, func(e locking.Event) { events <- e }, false)
	if _, ok := b.(locking.KeyedBackend); !ok {
		t.Error("the decorator hides the backend's keyed shortcut")
	}
	ctx := context.Background()
	r, err := b.Acquire(ctx, "k", time.Second)
	if err != nil || !r.OK {
		t.Fatal(r, err)
	}
	clk.Advance(time.Second + locking.TimeTolerance)
	if ok, _ := b.Release(ctx, r.LockID); ok {
		t.Fatal("released an expired lock")
	}
	if _, err := locking.GetByIDRaw(ctx, b, r.LockID); err != nil {
		t.Errorf("GetByIDRaw through telemetry: %v", err)
	}
	want := []locking.Event{
		{Type: locking.EventAcquire, KeyHash: locking.HashKey("k"), LockIDHash: locking.HashKey(r.LockID), Result: locking.ResultOK},
		{Type: locking.EventRelease, LockIDHash: locking.HashKey(r.LockID), Result: locking.ResultFail, Reason: locking.ReasonExpired},
		{Type: locking.EventLookup, LockIDHash: locking.HashKey(r.LockID), Result: locking.ResultFail},
	}
	for i, w := range want {
		select {
		case e := <-events:
			if e != w {
				t.Errorf("event %d = %+v, want %+v", i, e, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d never came", i)
		}
	}
}

// Cleanup is off by default: IsLocked leaves an expired lock's document.
func TestIsLockedReadOnlyByDefault(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now()}
	b, c := newBackend(t, WithClock(clk.Now))
	b.cleanupDone = func(bool, error) { t.Error("cleanup ran without WithCleanupInIsLocked") }
	mustAcquire(t, b, "k", time.Second)
	clk.Advance(time.Hour)
	if locked, err := b.IsLocked(context.Background(), "k"); locked || err != nil {
		t.Fatal(locked, err)
	}
	_ = b.Close() // waits for any cleanup IsLocked started
	if !docExists(t, c, DefaultLockCollection, "k") {
		t.Error("IsLocked deleted a document without WithCleanupInIsLocked")
	}
}

// With cleanup, IsLocked deletes a lock document expired past the guard,
// in the background; never one within the guard, never a fence counter,
// and its result is the same as without.
func TestCleanupInIsLocked(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now()}
	type outcome struct {
		deleted bool
		err     error
	}
	done := make(chan outcome, 4)
	opts := []Option{WithClock(clk.Now), WithCleanupInIsLocked(true)}
	b, c := newBackend(t, opts...)
	b.cleanupDone = func(d bool, err error) { done <- outcome{d, err} }
	ctx := context.Background()

	// Live: no cleanup, locked.
	r := mustAcquire(t, b, "k", time.Second)
	if locked, err := b.IsLocked(ctx, "k"); !locked || err != nil {
		t.Fatal(locked, err)
	}
	// Expired, but within the guard (skew + guard past expiry): not live,
	// not cleaned up.
	clk.Advance(time.Second + cleanupSkew + cleanupGuard)
	if locked, err := b.IsLocked(ctx, "k"); locked || err != nil {
		t.Fatal(locked, err)
	}
	_ = b.Close() // waits for any cleanup IsLocked started
	select {
	case o := <-done:
		t.Fatalf("cleanup within the guard: %+v", o)
	default:
	}
	if !docExists(t, c, DefaultLockCollection, "k") {
		t.Fatal("lock document deleted within the guard")
	}
	// A new backend on the same client carries on; the closed one's
	// cleanups are over.
	b, err := New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.cleanupDone = func(d bool, err error) { done <- outcome{d, err} }
	// Past the guard: IsLocked still answers false, and the document goes.
	clk.Advance(time.Millisecond)
	if locked, err := b.IsLocked(ctx, "k"); locked || err != nil {
		t.Fatal(locked, err)
	}
	select {
	case o := <-done:
		if !o.deleted || o.err != nil {
			t.Fatalf("cleanup: %+v", o)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no cleanup")
	}
	if docExists(t, c, DefaultLockCollection, "k") {
		t.Error("expired lock document survived cleanup")
	}
	if !docExists(t, c, DefaultFenceCollection, "fence:k") {
		t.Fatal("cleanup deleted the fence counter")
	}
	if r2 := mustAcquire(t, b, "k", time.Minute); r2.Fence <= r.Fence {
		t.Errorf("fence after cleanup %s, before %s", r2.Fence, r.Fence)
	}
	// A cancelled caller's IsLocked fails as before; cleanup never makes
	// it fail (a missing document: nothing to do, no error).
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.IsLocked(cctx, "k"); !errors.Is(err, locking.ErrAborted) {
		t.Errorf("cancelled IsLocked: %v", err)
	}
}

// Close waits for the cleanup in flight, and after it IsLocked starts
// none, while the backend's operations go on working on the client.
func TestCloseStopsCleanups(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now()}
	b, _ := newBackend(t, WithClock(clk.Now), WithCleanupInIsLocked(true))
	cleanups := make(chan error, 4)
	b.cleanupDone = func(_ bool, err error) { cleanups <- err }
	closetest.CloseStopsCleanups(t, closetest.Backend{Backend: b, Close: b.Close, Cleanups: cleanups,
		Expire: func(*testing.T, ...locking.AcquireResult) { clk.Advance(time.Hour) }})
}

// The cleanup transaction re-checks: a document re-acquired (another
// lockId) or live again since IsLocked looked is not deleted, and nothing
// outside the lock collection ever is.
func TestCleanupSafetyGuard(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now()}
	b, c := newBackend(t, WithClock(clk.Now), WithCleanupInIsLocked(true))
	ctx := context.Background()
	ref := b.locks.Doc("k")

	old := mustAcquire(t, b, "k", time.Second)
	clk.Advance(time.Hour)
	// Taken over since: the old lockId's cleanup must leave the new lock.
	cur := mustAcquire(t, b, "k", time.Second)
	clk.Advance(time.Hour) // the new lock is expired too, so only the lockId protects it
	if deleted, err := b.cleanupExpired(ctx, ref, old.LockID); deleted || err != nil {
		t.Errorf("cleanup of a re-acquired lock: %v, %v", deleted, err)
	}
	if id, _ := getDoc(t, c, DefaultLockCollection, "k").Data()[fieldLockID].(string); id != cur.LockID {
		t.Fatal("cleanup touched the new owner's document")
	}
	// Same lockId but live again (a lagging client's write): left alone.
	if _, err := ref.Update(ctx, []firestore.Update{{Path: fieldExpiresAt, Value: clk.Now().UnixMilli()}}); err != nil {
		t.Fatal(err)
	}
	if deleted, err := b.cleanupExpired(ctx, ref, cur.LockID); deleted || err != nil {
		t.Errorf("cleanup of a lock within the guard: %v, %v", deleted, err)
	}
	// Never a fence counter, even if asked.
	if deleted, err := b.cleanupExpired(ctx, b.fences.Doc("fence:k"), cur.LockID); deleted || !errors.Is(err, locking.ErrInternal) {
		t.Errorf("cleanup of a fence counter: %v, %v", deleted, err)
	}
	if !docExists(t, c, DefaultFenceCollection, "fence:k") || !docExists(t, c, DefaultLockCollection, "k") {
		t.Fatal("documents lost")
	}
	// Expired past the guard with the same lockId: deleted.
	clk.Advance(time.Hour)
	if deleted, err := b.cleanupExpired(ctx, ref, cur.LockID); !deleted || err != nil {
		t.Errorf("cleanup of an expired lock: %v, %v", deleted, err)
	}
	if docExists(t, c, DefaultLockCollection, "k") {
		t.Error("expired lock survived")
	}
}
