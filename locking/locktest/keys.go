package locktest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/locking"
)

// testKeyNormalization: keys are normalised to NFC before use, so
// canonically equivalent spellings (NFC and NFD) name one lock, for
// acquire, isLocked, lookup, and the hashes lookup reports.
func testKeyNormalization(t *testing.T, b locking.Backend) {
	ctx := t.Context()
	pairs := []struct{ nfc, nfd string }{
		{"caf\u00e9", "cafe\u0301"},
		{"\uD55C\uAE00", "\u1112\u1161\u11AB\u1100\u1173\u11AF"}, // 한글, precomposed and as jamo
		{"\u00c5ngstr\u00f6m", "A\u030angstro\u0308m"},
	}
	for i, p := range pairs {
		r := MustAcquire(t, b, p.nfd, 10*time.Second)
		if got, err := b.Acquire(ctx, p.nfc, 10*time.Second); err != nil || got.OK {
			t.Errorf("pair %d: Acquire(NFC) while NFD is held = %+v, %v; want OK false (same lock)", i, sanitize(got), err)
		}
		wantLocked(t, b, p.nfc, true, fmt.Sprintf("pair %d, NFC spelling of a lock taken as NFD", i))
		want := locking.HashKey(p.nfc)
		if locking.HashKey(p.nfd) != want {
			t.Fatalf("locking.HashKey does not normalise")
		}
		for _, k := range []string{p.nfc, p.nfd} {
			info, err := b.LookupKey(ctx, k)
			if err != nil || info == nil || info.KeyHash != want || info.Fence != r.Fence {
				t.Errorf("pair %d: LookupKey = %+v, %v; want key hash %s and fence %s", i, info, err, want, r.Fence)
			}
		}
		if info, err := b.LookupLockID(ctx, r.LockID); err != nil || info == nil || info.KeyHash != want {
			t.Errorf("pair %d: LookupLockID = %+v, %v; want key hash %s (of the NFC key)", i, info, err, want)
		}
		mustRelease(t, b, r.LockID)
		// And the other way round.
		r2 := MustAcquire(t, b, p.nfc, 10*time.Second)
		if got, err := b.Acquire(ctx, p.nfd, 10*time.Second); err != nil || got.OK {
			t.Errorf("pair %d: Acquire(NFD) while NFC is held = %+v, %v; want OK false", i, sanitize(got), err)
		}
		if r2.Fence <= r.Fence {
			t.Errorf("pair %d: fence %s after %s: the spellings have separate counters", i, r2.Fence, r.Fence)
		}
	}
	// Distinct keys stay distinct.
	MustAcquire(t, b, "caf\u00e9-x", 10*time.Second)
	MustAcquire(t, b, "cafe-x", 10*time.Second)
}

// testKeyLengthLimit: keys of up to 512 UTF-8 bytes after NFC work
// (including ones longer than that before normalisation, and pairs that
// differ only in the last byte); keys over 512 bytes fail with
// InvalidArgument for every key operation, before any write.
func testKeyLengthLimit(t *testing.T, b locking.Backend) {
	ctx := t.Context()
	ascii512 := strings.Repeat("k", locking.MaxKeyBytes)
	ascii512b := strings.Repeat("k", locking.MaxKeyBytes-1) + "j"
	nfc512 := strings.Repeat("\u00e9", locking.MaxKeyBytes/2)  // 256 × 2 bytes
	nfd768 := strings.Repeat("e\u0301", locking.MaxKeyBytes/2) // 768 bytes, 512 after NFC
	held := map[string]locking.AcquireResult{}
	for _, k := range []string{ascii512, ascii512b, nfc512} {
		r := MustAcquire(t, b, k, 10*time.Second)
		held[k] = r
		wantLocked(t, b, k, true, fmt.Sprintf("%d-byte key", len(k)))
		info, err := b.LookupKey(ctx, k)
		if err != nil || info == nil || info.KeyHash != locking.HashKey(k) || info.Fence != r.Fence {
			t.Errorf("LookupKey(%d-byte key) = %+v, %v", len(k), info, err)
		}
		e, err := b.Extend(ctx, r.LockID, 10*time.Second)
		if err != nil || !e.OK {
			t.Errorf("Extend of a %d-byte key's lock = %+v, %v", len(k), e, err)
		}
		r.ExpiresAt = e.ExpiresAt
		held[k] = r
	}
	// NFD spelling of a held 512-byte NFC key: the same lock, accepted
	// although it is 768 bytes before normalisation.
	if got, err := b.Acquire(ctx, nfd768, 10*time.Second); err != nil || got.OK {
		t.Errorf("Acquire(768-byte NFD spelling of a held 512-byte key) = %+v, %v; want OK false", sanitize(got), err)
	}

	n := records(t, b)
	over := []string{
		strings.Repeat("k", locking.MaxKeyBytes+1),
		strings.Repeat("\u00e9", locking.MaxKeyBytes/2) + "k", // 513 bytes
		strings.Repeat("e\u0301", locking.MaxKeyBytes/2) + "k",
		strings.Repeat("\u20ac", 171), // 513 bytes of 3-byte runes
		strings.Repeat("k", 10_000),
	}
	for _, k := range over {
		name := fmt.Sprintf("%d-byte key", len(k))
		r, err := b.Acquire(ctx, k, 10*time.Second)
		wantCode(t, err, locking.ErrInvalidArgument, "Acquire("+name+")")
		if r.OK {
			t.Errorf("Acquire(%s) returned OK", name)
		}
		locked, err := b.IsLocked(ctx, k)
		wantCode(t, err, locking.ErrInvalidArgument, "IsLocked("+name+")")
		if locked {
			t.Errorf("IsLocked(%s) = true", name)
		}
		info, err := b.LookupKey(ctx, k)
		wantCode(t, err, locking.ErrInvalidArgument, "LookupKey("+name+")")
		if info != nil {
			t.Errorf("LookupKey(%s) = %+v", name, info)
		}
		if err != nil && strings.Contains(err.Error(), k[:64]) {
			t.Errorf("the error for a %s quotes the raw key", name)
		}
	}
	wantRecords(t, b, n, "after over-long keys")
	// A truncating backend would map an over-long key onto its 512-byte
	// prefix: the locks held on those must be untouched.
	for k, r := range held {
		info, err := b.LookupLockID(ctx, r.LockID)
		if err != nil || info == nil || info.Fence != r.Fence || info.ExpiresAt.UnixMilli() != r.ExpiresAt.UnixMilli() {
			t.Errorf("the %d-byte key's lock after over-long keys: %+v, %v; want fence %s, expiry %v", len(k), info, err, r.Fence, r.ExpiresAt)
		}
	}
}

// testInvalidKeys: keys that no backend can store (empty, not UTF-8, or
// not a Firestore document id: "/", ".", "..", __.*__, as
// locking.NormalizeAndValidateKey refuses them) fail with InvalidArgument
// before any write.
func testInvalidKeys(t *testing.T, b locking.Backend) {
	ctx := t.Context()
	n := records(t, b)
	for _, k := range []string{"", "\xff\xfe", "a\xc3", "a/b", "/", ".", "..", "__reserved__", "____"} {
		name := fmt.Sprintf("key %q", k)
		r, err := b.Acquire(ctx, k, 10*time.Second)
		wantCode(t, err, locking.ErrInvalidArgument, "Acquire("+name+")")
		if r.OK {
			t.Errorf("Acquire(%s) returned OK", name)
		}
		_, err = b.IsLocked(ctx, k)
		wantCode(t, err, locking.ErrInvalidArgument, "IsLocked("+name+")")
		_, err = b.LookupKey(ctx, k)
		wantCode(t, err, locking.ErrInvalidArgument, "LookupKey("+name+")")
	}
	wantRecords(t, b, n, "after invalid keys")
	// Near misses are ordinary keys.
	for _, k := range []string{"a.b", "...", "__x", "x__", "_", "a:b", " "} {
		r := MustAcquire(t, b, k, 10*time.Second)
		mustRelease(t, b, r.LockID)
	}
}

// testInvalidLockIDs: release, extend and lookup validate the lockId
// (^[A-Za-z0-9_-]{22}$) and fail with InvalidArgument, changing nothing,
// and without quoting it in the error.
func testInvalidLockIDs(t *testing.T, b locking.Backend) {
	ctx := t.Context()
	r := MustAcquire(t, b, "held", 10*time.Second)
	n := records(t, b)
	bad := []string{
		"",
		"short",
		r.LockID[:21],
		r.LockID + "A",
		r.LockID[:21] + "+",
		r.LockID[:21] + "/",
		r.LockID[:21] + "=",
		r.LockID[:20] + "é",
		r.LockID[:21] + " ",
		r.LockID[:21] + "\x00",
		strings.Repeat("A", 1000),
	}
	for _, id := range bad {
		name := fmt.Sprintf("%d-byte lockId", len(id))
		ok, err := b.Release(ctx, id)
		wantCode(t, err, locking.ErrInvalidArgument, "Release("+name+")")
		if ok {
			t.Errorf("Release(%s) = true", name)
		}
		e, err := b.Extend(ctx, id, 10*time.Second)
		wantCode(t, err, locking.ErrInvalidArgument, "Extend("+name+")")
		if e.OK {
			t.Errorf("Extend(%s) OK", name)
		}
		info, err := b.LookupLockID(ctx, id)
		wantCode(t, err, locking.ErrInvalidArgument, "LookupLockID("+name+")")
		if info != nil {
			t.Errorf("LookupLockID(%s) = %+v", name, info)
		}
		if len(id) >= 20 && err != nil && strings.Contains(err.Error(), id) {
			t.Errorf("the error for a malformed %s quotes it", name)
		}
	}
	wantRecords(t, b, n, "after invalid lockIds")
	info, err := b.LookupLockID(ctx, r.LockID)
	if err != nil || info == nil || info.Fence != r.Fence || !info.ExpiresAt.Equal(r.ExpiresAt) {
		t.Errorf("the held lock after invalid lockIds: %+v, %v", info, err)
	}
}

// testInvalidTTL: acquire and extend take a ttl that is a positive whole
// number of milliseconds, or fail with InvalidArgument, changing nothing.
func testInvalidTTL(t *testing.T, b locking.Backend) {
	ctx := t.Context()
	r := MustAcquire(t, b, "ttl-held", 10*time.Second)
	n := records(t, b)
	for _, ttl := range []time.Duration{0, -time.Second, time.Microsecond, 1500 * time.Microsecond} {
		got, err := b.Acquire(ctx, "ttl-free", ttl)
		wantCode(t, err, locking.ErrInvalidArgument, fmt.Sprintf("Acquire(ttl %s)", ttl))
		if got.OK {
			t.Errorf("Acquire(ttl %s) OK", ttl)
		}
		e, err := b.Extend(ctx, r.LockID, ttl)
		wantCode(t, err, locking.ErrInvalidArgument, fmt.Sprintf("Extend(ttl %s)", ttl))
		if e.OK {
			t.Errorf("Extend(ttl %s) OK", ttl)
		}
	}
	wantRecords(t, b, n, "after invalid TTLs")
	wantLocked(t, b, "ttl-free", false, "after acquires with invalid TTLs")
	info, err := b.LookupLockID(ctx, r.LockID)
	if err != nil || info == nil || !info.ExpiresAt.Equal(r.ExpiresAt) {
		t.Errorf("the held lock after extends with invalid TTLs: %+v, %v; want expiry %v", info, err, r.ExpiresAt)
	}
}
