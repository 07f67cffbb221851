package locktest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/locking"
)

// testExtendResetsExpiry: extend(ttl) sets the expiry to now+ttl,
// replacing the remaining time (not old expiry+ttl), in the result and in
// storage (lookup); a shorter ttl shortens the lock.
func testExtendResetsExpiry(t *testing.T, b locking.Backend) {
	ctx := t.Context()
	slack := clockSlack(b)
	r := MustAcquire(t, b, "extend-reset", 10*time.Second)
	time.Sleep(200 * time.Millisecond) // so that now+ttl and acquisition+ttl differ by more than a client clock's slack
	for _, ttl := range []time.Duration{3 * time.Second, 20 * time.Second, 1500 * time.Millisecond} {
		before := time.Now()
		e, err := b.Extend(ctx, r.LockID, ttl)
		after := time.Now()
		if err != nil || !e.OK {
			t.Fatalf("Extend(%s) = %+v, %v; want OK", ttl, e, err)
		}
		if !Within(e.ExpiresAt, before.Add(ttl), after.Add(ttl), slack) {
			t.Errorf("Extend(%s): ExpiresAt %v, want now+ttl in [%v, %v] (not the old expiry plus ttl)",
				ttl, e.ExpiresAt, before.Add(ttl), after.Add(ttl))
		}
		info, err := b.LookupLockID(ctx, r.LockID)
		if err != nil || info == nil || info.ExpiresAt.UnixMilli() != e.ExpiresAt.UnixMilli() || info.Fence != r.Fence {
			t.Errorf("after Extend(%s): lookup %+v, %v; want expiry %v and fence %s", ttl, info, err, e.ExpiresAt, r.Fence)
		}
	}
	// The last extend shortened the lock to 1.5 s: it really ends then.
	info, _ := b.LookupLockID(ctx, r.LockID)
	if info == nil {
		t.Fatal("lock gone after extensions")
	}
	awaitExpiry(t, b, "extend-reset", info.ExpiresAt, "past the shortened expiry")
}

// testExtendKeepsAlive: an extended lock outlives its original expiry
// (the extension is applied, atomically, to the stored lock).
func testExtendKeepsAlive(t *testing.T, b locking.Backend) {
	ctx := t.Context()
	r := MustAcquire(t, b, "extend-alive", 300*time.Millisecond)
	e, err := b.Extend(ctx, r.LockID, 5*time.Second)
	if err != nil || !e.OK {
		t.Fatalf("Extend = %+v, %v; want OK", e, err)
	}
	sleepUntil(r.ExpiresAt.Add(tolerance + margin)) // a lock still held: only time passing can show it outlives its first expiry
	wantLocked(t, b, "extend-alive", true, "past the original expiry of an extended lock")
	if got, err := b.Acquire(ctx, "extend-alive", time.Second); err != nil || got.OK {
		t.Errorf("Acquire of an extended lock past its original expiry = %+v, %v; want OK false", sanitize(got), err)
	}
	mustRelease(t, b, r.LockID)
}

// testNoResurrection: once a lock has expired (past the tolerance),
// extend returns not OK and does not recreate it; IsLocked stays false,
// lookups return nil, release returns false, and the next acquire gets a
// larger fence.
func testNoResurrection(t *testing.T, b locking.Backend) {
	ctx := t.Context()
	r := MustAcquire(t, b, "no-resurrection", 100*time.Millisecond)
	awaitExpiry(t, b, "no-resurrection", r.ExpiresAt, "past the expiry")
	for i := range 3 {
		if e, err := b.Extend(ctx, r.LockID, time.Minute); e.OK || err != nil {
			t.Errorf("Extend #%d of an expired lock = %+v, %v; want not OK, nil (no resurrection)", i, e, err)
		}
		wantLocked(t, b, "no-resurrection", false, fmt.Sprintf("after extend #%d of an expired lock", i))
	}
	if info, err := b.LookupKey(ctx, "no-resurrection"); info != nil || err != nil {
		t.Errorf("LookupKey of an expired lock = %+v, %v; want nil, nil", info, err)
	}
	if info, err := b.LookupLockID(ctx, r.LockID); info != nil || err != nil {
		t.Errorf("LookupLockID of an expired lock = %+v, %v; want nil, nil", info, err)
	}
	if ok, err := b.Release(ctx, r.LockID); ok || err != nil {
		t.Errorf("Release of an expired lock = %v, %v; want false, nil", ok, err)
	}
	r2 := MustAcquire(t, b, "no-resurrection", 10*time.Second)
	if r2.Fence <= r.Fence {
		t.Errorf("fence after expiry %s, not above %s", r2.Fence, r.Fence)
	}
}

// testLivenessTolerance: the unified liveness predicate: a lock is live
// until TimeTolerance (1000 ms) past its expiry and not after.
func testLivenessTolerance(t *testing.T, b locking.Backend) {
	ctx := t.Context()
	r := MustAcquire(t, b, "tolerance", 100*time.Millisecond)
	// Inside the tolerance window. An answer that came back after the
	// window closed proves nothing, so only a timely one is judged.
	sleepUntil(r.ExpiresAt.Add(200 * time.Millisecond)) // into the window: real time must pass
	locked, err := b.IsLocked(ctx, "tolerance")
	got, aerr := b.Acquire(ctx, "tolerance", time.Second)
	if time.Now().Before(r.ExpiresAt.Add(tolerance - 100*time.Millisecond)) {
		if err != nil || !locked {
			t.Errorf("IsLocked 200 ms past expiry (within the %s tolerance) = %v, %v; want true", tolerance, locked, err)
		}
		if aerr != nil || got.OK {
			t.Errorf("Acquire 200 ms past expiry (within the %s tolerance) = %+v, %v; want OK false", tolerance, sanitize(got), aerr)
		}
	} else {
		t.Logf("inconclusive: the backend answered too slowly to judge the tolerance window")
	}
	awaitExpiry(t, b, "tolerance", r.ExpiresAt, "past expiry plus tolerance")
	MustAcquire(t, b, "tolerance", 10*time.Second)
}

// testStaleOwnerAfterTakeover: after a lock expires and another owner
// acquires the key, the old owner's release and extend return false and
// leave the new owner's lock exactly as it was (TOCTOU protection,
// explicit ownership verification).
func testStaleOwnerAfterTakeover(t *testing.T, b locking.Backend) {
	ctx := t.Context()
	old := MustAcquire(t, b, "takeover", 100*time.Millisecond)
	awaitExpiry(t, b, "takeover", old.ExpiresAt, "past the old owner's expiry")
	cur := MustAcquire(t, b, "takeover", 10*time.Second)
	if cur.Fence <= old.Fence {
		t.Errorf("new owner's fence %s, not above the old %s", cur.Fence, old.Fence)
	}
	for i := range 3 {
		if e, err := b.Extend(ctx, old.LockID, time.Minute); e.OK || err != nil {
			t.Errorf("old owner's Extend #%d = %+v, %v; want not OK, nil", i, e, err)
		}
		if ok, err := b.Release(ctx, old.LockID); ok || err != nil {
			t.Errorf("old owner's Release #%d = %v, %v; want false, nil", i, ok, err)
		}
	}
	info, err := b.LookupLockID(ctx, cur.LockID)
	if err != nil || info == nil || info.Fence != cur.Fence || info.ExpiresAt.UnixMilli() != cur.ExpiresAt.UnixMilli() {
		t.Errorf("new owner's lock after the old owner's calls: %+v, %v; want fence %s, expiry %v", info, err, cur.Fence, cur.ExpiresAt)
	}
	if info, err := b.LookupLockID(ctx, old.LockID); info != nil || err != nil {
		t.Errorf("LookupLockID(old lockId) = %+v, %v; want nil (it must not resolve to the new lock)", info, err)
	}
	mustRelease(t, b, cur.LockID)
}

// op is one timed call of the TOCTOU race.
type op struct {
	name       string // "release" or "extend"
	start, end time.Time
	ok         bool
	err        error
}

// testTOCTOURace: an old owner's releases and extends race its lock's
// expiry and re-acquisition by many contenders, on several keys at once.
// Exactly one contender wins each key; every old-owner call that started
// after the winner's acquire returned, or after one of the old owner's
// releases succeeded, returns false; at most one old release succeeds; and
// the winner's lock is left exactly as acquired (same fence and expiry,
// releasable).
func testTOCTOURace(t *testing.T, b locking.Backend) {
	var wg sync.WaitGroup
	for k := range 3 {
		wg.Go(func() { toctouRound(t, b, fmt.Sprintf("toctou-%d", k)) })
	}
	wg.Wait()
}

func toctouRound(t *testing.T, b locking.Backend, key string) {
	ctx := t.Context()
	const (
		oldOwners   = 6
		contenders  = 4
		spread      = 60 * time.Millisecond // old-owner calls land within ±spread of the boundary
		raceTimeout = 10 * time.Second
	)
	old, err := b.Acquire(ctx, key, 100*time.Millisecond)
	if err != nil || !old.OK {
		t.Errorf("%s: Acquire = %+v, %v", key, sanitize(old), err)
		return
	}
	boundary := old.ExpiresAt.Add(tolerance)
	sleepUntil(boundary.Add(-2 * spread)) // the race is around a real instant: wait for it

	var (
		mu       sync.Mutex
		winners  []locking.AcquireResult
		wonAt    time.Time
		won      = make(chan struct{})
		wonOnce  sync.Once
		errs     atomic.Int32
		ops      []op
		deadline = time.Now().Add(raceTimeout)
	)
	record := func(o op) {
		mu.Lock()
		ops = append(ops, o)
		mu.Unlock()
	}
	call := func(name string) {
		o := op{name: name, start: time.Now()}
		if name == "release" {
			o.ok, o.err = b.Release(ctx, old.LockID)
		} else {
			var e locking.ExtendResult
			// A 1 ms extension: if it lands while the lock is live it is
			// legitimate, and keeps the lock only ~1 s longer.
			e, o.err = b.Extend(ctx, old.LockID, time.Millisecond)
			o.ok = e.OK
		}
		o.end = time.Now()
		record(o)
	}

	var wg sync.WaitGroup
	for range contenders {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				select {
				case <-won:
					return
				default:
				}
				r, err := b.Acquire(ctx, key, 30*time.Second)
				end := time.Now()
				if err != nil {
					errs.Add(1) // contention may surface as ServiceUnavailable
				}
				if r.OK {
					mu.Lock()
					winners = append(winners, r)
					if wonAt.IsZero() {
						wonAt = end
					}
					mu.Unlock()
					wonOnce.Do(func() { close(won) })
				}
				// Spin, but leave the storage room to serve the old owner.
				time.Sleep(time.Duration(rand.Int64N(int64(5 * time.Millisecond))))
			}
		})
	}
	for g := range oldOwners {
		wg.Go(func() {
			first, second := "release", "extend"
			if g%2 == 0 {
				first, second = second, first
			}
			at := boundary.Add(time.Duration(rand.Int64N(int64(2*spread))) - spread)
			sleepUntil(at)
			call(first)
			call(second)
			// And once more after the takeover, racing nothing but the
			// winner's own lock.
			select {
			case <-won:
			case <-time.After(time.Until(deadline) + 5*time.Second):
				return
			}
			call(second)
			call(first)
		})
	}
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(winners) != 1 {
		t.Errorf("%s: %d contenders acquired the key; want exactly 1", key, len(winners))
		return
	}
	win := winners[0]
	if win.Fence <= old.Fence {
		t.Errorf("%s: winner's fence %s, not above the old owner's %s", key, win.Fence, old.Fence)
	}
	var releasedAt time.Time
	releases := 0
	for _, o := range ops {
		if o.err != nil {
			t.Logf("%s: old owner's %s: %v", key, o.name, o.err)
		}
		if o.name == "release" && o.ok {
			releases++
			if releasedAt.IsZero() || o.end.Before(releasedAt) {
				releasedAt = o.end
			}
		}
	}
	if releases > 1 {
		t.Errorf("%s: %d releases of the old lock succeeded; want at most 1", key, releases)
	}
	late := 0
	for _, o := range ops {
		afterWin := o.start.After(wonAt)
		afterRelease := !releasedAt.IsZero() && o.start.After(releasedAt)
		if afterWin {
			late++
		}
		if o.ok && (afterWin || afterRelease) {
			t.Errorf("%s: old owner's %s started %v after the takeover (or its own release) and succeeded: it acted on the new owner's lock",
				key, o.name, o.start.Sub(wonAt).Round(time.Millisecond))
		}
	}
	if late == 0 {
		t.Errorf("%s: no old-owner call started after the takeover; the race checked nothing", key)
	}
	info, err := b.LookupLockID(ctx, win.LockID)
	if err != nil || info == nil || info.Fence != win.Fence || info.ExpiresAt.UnixMilli() != win.ExpiresAt.UnixMilli() {
		t.Errorf("%s: winner's lock after the race: %+v, %v; want fence %s, expiry %v", key, info, err, win.Fence, win.ExpiresAt)
	}
	if ok, err := b.Release(ctx, win.LockID); !ok || err != nil {
		t.Errorf("%s: winner's Release = %v, %v; want true (the old owner must not have released it)", key, ok, err)
	}
	if n := errs.Load(); n > 0 {
		t.Logf("%s: %d contender acquire errors (contention)", key, n)
	}
}
