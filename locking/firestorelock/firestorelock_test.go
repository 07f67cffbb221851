package firestorelock

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/locking"
)

var emu *emulator.Emulator

func TestMain(m *testing.M) { os.Exit(emulator.Main(m, &emu)) }

func newBackend(t *testing.T, opts ...Option) (*Backend, *firestore.Client) {
	t.Helper()
	c := emu.TestClient(t)
	b, err := New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b, c
}

func count(t *testing.T, c *firestore.Client, coll string) int {
	t.Helper()
	docs, err := c.Collection(coll).Documents(context.Background()).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	return len(docs)
}

// Mutual exclusion: of many concurrent acquirers of one key, exactly one
// wins, round after round.
func TestConcurrentAcquireExactlyOneWins(t *testing.T) {
	t.Parallel()
	b, _ := newBackend(t)
	ctx := context.Background()
	for round := range 5 {
		var wins atomic.Int32
		var winner atomic.Value
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := b.Acquire(ctx, "contended", time.Minute)
				if err != nil {
					t.Errorf("round %d: %v", round, err)
					return
				}
				if r.OK {
					wins.Add(1)
					winner.Store(r.LockID)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d winners", round, wins.Load())
		}
		if ok, err := b.Release(ctx, winner.Load().(string)); !ok || err != nil {
			t.Fatalf("release: %v %v", ok, err)
		}
	}
}

// Fences are 15 digits and strictly increase across 100 acquisitions, and
// the counter outlives every release.
func TestFencesIncreaseAndCountersSurvive(t *testing.T) {
	t.Parallel()
	b, c := newBackend(t)
	ctx := context.Background()
	prev := ""
	for i := range 100 {
		r, err := b.Acquire(ctx, "job", time.Minute)
		if err != nil || !r.OK {
			t.Fatalf("acquire %d: %+v %v", i, r, err)
		}
		if len(r.Fence) != 15 || r.Fence <= prev {
			t.Fatalf("acquire %d: fence %q after %q", i, r.Fence, prev)
		}
		prev = r.Fence
		if ok, err := b.Release(ctx, r.LockID); !ok || err != nil {
			t.Fatalf("release %d: %v %v", i, ok, err)
		}
	}
	if prev != "000000000000100" {
		t.Errorf("last fence %s, want 000000000000100", prev)
	}
	if n := count(t, c, DefaultLockCollection); n != 0 {
		t.Errorf("%d lock documents left after release", n)
	}
	snap, err := c.Collection(DefaultFenceCollection).Doc("fence:job").Get(ctx)
	if err != nil || snap.Data()["fence"] != "000000000000100" {
		t.Errorf("fence counter after release: %v %v", snap.Data(), err)
	}
}

func TestForeignAndExpiredLockIDs(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	b, _ := newBackend(t, WithClock(clock))
	ctx := context.Background()
	r, err := b.Acquire(ctx, "k", 10*time.Second)
	if err != nil || !r.OK {
		t.Fatal(r, err)
	}
	foreign, _ := locking.NewLockID()
	if ok, err := b.Release(ctx, foreign); ok || err != nil {
		t.Errorf("release of a foreign lockId: %v %v", ok, err)
	}
	if e, err := b.Extend(ctx, foreign, time.Minute); e.OK || err != nil {
		t.Errorf("extend of a foreign lockId: %+v %v", e, err)
	}
	// Extend resets to now+ttl (it does not add).
	advance(5 * time.Second)
	e, err := b.Extend(ctx, r.LockID, 3*time.Second)
	if !e.OK || err != nil || e.ExpiresAt.UnixMilli() != clock().Add(3*time.Second).UnixMilli() {
		t.Errorf("extend: %+v %v", e, err)
	}
	// Past expiry plus the tolerance: no extend (no resurrection), no
	// release, and another owner takes it with the next fence.
	advance(3*time.Second + locking.TimeTolerance)
	if e, err := b.Extend(ctx, r.LockID, time.Minute); e.OK || err != nil {
		t.Errorf("extend resurrected an expired lock: %+v %v", e, err)
	}
	if locked, _ := b.IsLocked(ctx, "k"); locked {
		t.Error("expired lock reported as locked")
	}
	if ok, err := b.Release(ctx, r.LockID); ok || err != nil {
		t.Errorf("release of an expired lock: %v %v", ok, err)
	}
	r2, err := b.Acquire(ctx, "k", time.Minute)
	if err != nil || !r2.OK || r2.Fence <= r.Fence {
		t.Fatalf("takeover: %+v %v (old fence %s)", r2, err, r.Fence)
	}
	if ok, _ := b.Release(ctx, r.LockID); ok {
		t.Error("old owner released the new owner's lock")
	}
	if e, _ := b.Extend(ctx, r.LockID, time.Minute); e.OK {
		t.Error("old owner extended the new owner's lock")
	}
}

// The stored layout is SyncGuard's: ids, field names and types.
func TestRawLayout(t *testing.T) {
	t.Parallel()
	b, c := newBackend(t)
	ctx := context.Background()
	nfd, nfc := "snapshot:cafe\u0301", "snapshot:caf\u00e9"
	r, err := b.Acquire(ctx, nfd, time.Minute)
	if err != nil || !r.OK {
		t.Fatal(r, err)
	}
	// The NFC spelling is the same lock.
	if r2, _ := b.Acquire(ctx, nfc, time.Minute); r2.OK {
		t.Error("NFC and NFD spellings are different locks")
	}
	snap, err := c.Collection("locks").Doc(nfc).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := snap.Data()
	if _, ok := d["expiresAtMs"].(int64); !ok {
		t.Errorf("expiresAtMs is %T", d["expiresAtMs"])
	}
	if _, ok := d["acquiredAtMs"].(int64); !ok {
		t.Errorf("acquiredAtMs is %T", d["acquiredAtMs"])
	}
	if d["lockId"] != r.LockID || d["fence"] != "000000000000001" || d["key"] != nfd || len(d) != 5 {
		t.Errorf("lock doc = %v", d)
	}
	fence, err := c.Collection("fence_counters").Doc("fence:" + nfc).Get(ctx)
	if err != nil || fence.Data()["fence"] != "000000000000001" || fence.Data()["keyDebug"] != nfd || len(fence.Data()) != 2 {
		t.Errorf("fence doc = %v %v", fence.Data(), err)
	}
	info, err := b.LookupKey(ctx, nfc)
	if err != nil || info == nil || info.KeyHash != locking.HashKey(nfc) || info.Fence != r.Fence || info.LockIDHash != locking.HashKey(r.LockID) {
		t.Errorf("lookup = %+v %v", info, err)
	}
	if info, _ := b.LookupLockID(ctx, r.LockID); info == nil || info.Fence != r.Fence {
		t.Errorf("lookup by lockId = %+v", info)
	}
}

// Documents another client wrote, with doubles for the times, are honoured:
// a live one blocks, an expired one is taken over with the next fence.
func TestForeignDocuments(t *testing.T) {
	t.Parallel()
	b, c := newBackend(t)
	ctx := context.Background()
	nowMs := float64(time.Now().UnixMilli())
	seed := func(key string, expires float64) {
		if _, err := c.Collection("locks").Doc(key).Set(ctx, map[string]any{
			"lockId": "AAAAAAAAAAAAAAAAAAAAAA", "expiresAtMs": expires, "acquiredAtMs": nowMs - 5000, "key": key, "fence": "000000000000041",
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Collection("fence_counters").Doc("fence:"+key).Set(ctx, map[string]any{"fence": "000000000000041", "keyDebug": key}); err != nil {
			t.Fatal(err)
		}
	}
	seed("live", nowMs+60000.5)
	seed("expired", nowMs-5000.5)
	if r, err := b.Acquire(ctx, "live", time.Minute); r.OK || err != nil {
		t.Errorf("acquired over a live foreign lock: %+v %v", r, err)
	}
	if locked, _ := b.IsLocked(ctx, "live"); !locked {
		t.Error("live foreign lock not seen")
	}
	r, err := b.Acquire(ctx, "expired", time.Minute)
	if err != nil || !r.OK || r.Fence != "000000000000042" {
		t.Errorf("takeover of an expired foreign lock: %+v %v", r, err)
	}
}

func TestInvalidInputTouchesNothing(t *testing.T) {
	t.Parallel()
	b, c := newBackend(t)
	ctx := context.Background()
	for _, key := range []string{"", "a/b", ".", "..", "__x__", strings.Repeat("k", 513)} {
		if _, err := b.Acquire(ctx, key, time.Minute); !errors.Is(err, locking.ErrInvalidArgument) {
			t.Errorf("key %q: %v", key, err)
		}
	}
	if _, err := b.Acquire(ctx, "ok", 0); !errors.Is(err, locking.ErrInvalidArgument) {
		t.Errorf("ttl 0: %v", err)
	}
	for _, id := range []string{"", "not-a-lock-id", strings.Repeat("a", 23)} {
		if _, err := b.Release(ctx, id); !errors.Is(err, locking.ErrInvalidArgument) {
			t.Errorf("release %q: %v", id, err)
		}
		if _, err := b.Extend(ctx, id, time.Minute); !errors.Is(err, locking.ErrInvalidArgument) {
			t.Errorf("extend %q: %v", id, err)
		}
	}
	if count(t, c, "locks")+count(t, c, "fence_counters") != 0 {
		t.Error("documents written for invalid input")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Acquire(cctx, "ok", time.Minute); !errors.Is(err, locking.ErrAborted) {
		t.Errorf("cancelled acquire: %v", err)
	}
	for _, opts := range [][]Option{{WithCollections("same", "same")}, {WithCollections("", "f")}, {WithCollections("a/b", "f")}} {
		if _, err := New(c, opts...); !errors.Is(err, locking.ErrInvalidArgument) {
			t.Errorf("config %v accepted: %v", opts, err)
		}
	}
}

func TestDuplicateLockIDRefused(t *testing.T) {
	t.Parallel()
	b, c := newBackend(t)
	ctx := context.Background()
	r, _ := b.Acquire(ctx, "one", time.Minute)
	snap, _ := c.Collection("locks").Doc("one").Get(ctx)
	if _, err := c.Collection("locks").Doc("two").Set(ctx, snap.Data()); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Release(ctx, r.LockID); ok || !errors.Is(err, locking.ErrInternal) {
		t.Errorf("release with a duplicate lockId: %v %v", ok, err)
	}
	if n := count(t, c, "locks"); n != 2 {
		t.Errorf("%d lock docs: a duplicate release deleted something", n)
	}
}

// A Lease on this backend notices when its lock document disappears.
func TestLeaseLossOnDeletedLock(t *testing.T) {
	t.Parallel()
	b, c := newBackend(t)
	ctx := context.Background()
	l, err := locking.Acquire(ctx, b, "lease", locking.WithTTL(600*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Collection("locks").Doc("lease").Delete(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("lease not lost after its lock was deleted")
	}
	if !errors.Is(l.Err(), locking.ErrLeaseLost) {
		t.Errorf("Err = %v", l.Err())
	}
	_ = l.Release(ctx)
}
