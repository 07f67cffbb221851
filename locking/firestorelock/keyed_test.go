package firestorelock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/backendkit"
)

// The keyed shortcut (ReleaseKey, ExtendKey) reads the key's document and
// must decide exactly as the lockId query path does: only the live lock's
// own lockId on that key changes anything; nothing is ever revived.
func TestKeyedReleaseAndExtend(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now()}
	b, c := newBackend(t, WithClock(clk.Now))
	ctx := context.Background()
	a := mustAcquire(t, b, "keyed:a", 10*time.Second)
	other := mustAcquire(t, b, "keyed:b", 10*time.Second)
	foreign, err := backendkit.NewLockID()
	if err != nil {
		t.Fatal(err)
	}

	// Another key's lockId, or an unknown one, on key a: refused, a untouched.
	for _, id := range []string{other.LockID, foreign} {
		if ok, err := b.ReleaseKey(ctx, "keyed:a", id); ok || err != nil {
			t.Errorf("ReleaseKey with a foreign lockId = %v, %v", ok, err)
		}
		if r, err := b.ExtendKey(ctx, "keyed:a", id, time.Minute); r.OK || err != nil {
			t.Errorf("ExtendKey with a foreign lockId = %+v, %v", r, err)
		}
	}
	// The right lockId on the wrong key: refused too.
	if ok, err := b.ReleaseKey(ctx, "keyed:b", a.LockID); ok || err != nil {
		t.Errorf("ReleaseKey on the wrong key = %v, %v", ok, err)
	}
	if !docExists(t, c, DefaultLockCollection, "keyed:a") || !docExists(t, c, DefaultLockCollection, "keyed:b") {
		t.Fatal("a refused call deleted a lock")
	}

	// Extend resets to now+ttl, through an NFD spelling of the same key too.
	clk.Advance(2 * time.Second)
	r, err := b.ExtendKey(ctx, "keyed:a", a.LockID, 30*time.Second)
	if err != nil || !r.OK || r.ExpiresAt.UnixMilli() != clk.Now().Add(30*time.Second).UnixMilli() {
		t.Fatalf("ExtendKey = %+v, %v; want expiry now+30s", r, err)
	}
	if got := millis(getDoc(t, c, DefaultLockCollection, "keyed:a").Data()[fieldExpiresAt]); got != r.ExpiresAt.UnixMilli() {
		t.Errorf("stored expiry %d, want %d", got, r.ExpiresAt.UnixMilli())
	}

	// Expired (past the 1 s tolerance): neither extend nor release revive or free it.
	clk.Advance(31*time.Second + locking.TimeTolerance + time.Millisecond)
	if r, err := b.ExtendKey(ctx, "keyed:a", a.LockID, time.Minute); r.OK || err != nil {
		t.Errorf("ExtendKey of an expired lock = %+v, %v", r, err)
	}
	if live, err := b.IsLocked(ctx, "keyed:a"); live || err != nil {
		t.Errorf("IsLocked after refused extend = %v, %v", live, err)
	}
	if ok, err := b.ReleaseKey(ctx, "keyed:a", a.LockID); ok || err != nil {
		t.Errorf("ReleaseKey of an expired lock = %v, %v", ok, err)
	}

	// A normal release, found through the NFD spelling of the key.
	c2 := mustAcquire(t, b, "caf\u00e9", 10*time.Second)
	if ok, err := b.ReleaseKey(ctx, "cafe\u0301", c2.LockID); !ok || err != nil {
		t.Fatalf("ReleaseKey through the NFD spelling = %v, %v", ok, err)
	}
	if ok, err := b.ReleaseKey(ctx, "caf\u00e9", c2.LockID); ok || err != nil {
		t.Errorf("second ReleaseKey = %v, %v", ok, err)
	}

	// Bad input is refused before any I/O.
	if _, err := b.ReleaseKey(ctx, "keyed:a", "not a lock id"); !errors.Is(err, locking.ErrInvalidArgument) {
		t.Errorf("ReleaseKey with a malformed lockId: %v", err)
	}
	if _, err := b.ExtendKey(ctx, "a/b", a.LockID, time.Minute); !errors.Is(err, locking.ErrInvalidArgument) {
		t.Errorf("ExtendKey with an invalid key: %v", err)
	}
	if _, err := b.ExtendKey(ctx, "keyed:a", a.LockID, 0); !errors.Is(err, locking.ErrInvalidArgument) {
		t.Errorf("ExtendKey with ttl 0: %v", err)
	}
}
