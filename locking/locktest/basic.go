package locktest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/backendkit"
)

// testCapabilities: backends MUST expose timeAuthority in capabilities;
// all v1 backends MUST support fencing.
func testCapabilities(t *testing.T, b locking.Backend) {
	c := b.Capabilities()
	if c.Backend == "" {
		t.Error("Capabilities().Backend is empty")
	}
	if !c.SupportsFencing {
		t.Error("Capabilities().SupportsFencing is false; v1 backends MUST provide fence tokens")
	}
	if c.TimeAuthority != "client" && c.TimeAuthority != "server" {
		t.Errorf("Capabilities().TimeAuthority = %q; want \"client\" or \"server\"", c.TimeAuthority)
	}
}

// testAcquireResult: a successful acquire returns a lockId of 22 base64url
// characters, unique per acquisition; an expiry of now+ttl by the time
// authority; and a 15-digit fence. The lock is then held (IsLocked).
func testAcquireResult(t *testing.T, b locking.Backend) {
	const ttl = 10 * time.Second
	seen := map[string]bool{}
	for i := range 20 {
		key := fmt.Sprintf("acquire-result-%d", i)
		before := time.Now()
		r := MustAcquire(t, b, key, ttl)
		after := time.Now()
		if !lockIDForm.MatchString(r.LockID) {
			t.Errorf("acquire %d: lockId of %d bytes is not 22 base64url characters", i, len(r.LockID))
		}
		if seen[r.LockID] {
			t.Errorf("acquire %d: lockId reused", i)
		}
		seen[r.LockID] = true
		if !Within(r.ExpiresAt, before.Add(ttl), after.Add(ttl), clockSlack(b)) {
			t.Errorf("acquire %d: ExpiresAt %v, want now+%s in [%v, %v]", i, r.ExpiresAt, ttl, before.Add(ttl), after.Add(ttl))
		}
		if !fenceForm.MatchString(r.Fence) {
			t.Errorf("acquire %d: fence %q is not 15 digits", i, r.Fence)
		}
		wantLocked(t, b, key, true, fmt.Sprintf("after acquire %d", i))
	}
	// A lockId from elsewhere is a different lock: the ids are not derived
	// from the key.
	r1 := MustAcquire(t, b, "same-key-twice", time.Second)
	mustRelease(t, b, r1.LockID)
	r2 := MustAcquire(t, b, "same-key-twice", time.Second)
	if r1.LockID == r2.LockID {
		t.Error("two acquisitions of one key returned the same lockId")
	}
}

// testContention: a held key gives OK false (a result, not an error),
// whoever asks (backends are non-reentrant), and other keys are
// unaffected.
func testContention(t *testing.T, b locking.Backend) {
	ctx := t.Context()
	r := MustAcquire(t, b, "contended", 10*time.Second)
	for i := range 3 {
		got, err := b.Acquire(ctx, "contended", 10*time.Second)
		if err != nil || got.OK {
			t.Errorf("Acquire of a held key #%d = %+v, %v; want OK false, nil error", i, sanitize(got), err)
		}
		if got.LockID != "" || got.Fence != "" {
			t.Errorf("contended Acquire returned a lockId or fence: %+v", sanitize(got))
		}
	}
	other := MustAcquire(t, b, "contended-other", 10*time.Second)
	if other.LockID == r.LockID {
		t.Error("different keys got the same lockId")
	}
	// The contended attempts changed nothing.
	info, err := b.LookupLockID(ctx, r.LockID)
	if err != nil || info == nil || info.Fence != r.Fence || !info.ExpiresAt.Equal(r.ExpiresAt) {
		t.Errorf("holder's lock after contention: %+v, %v; want fence %s, expiry %v", info, err, r.Fence, r.ExpiresAt)
	}
}

// testFenceMonotonic: 100 sequential acquisitions of one key (each
// released before the next) return 15-digit fences, strictly increasing as
// strings, so that sorting them lexicographically gives acquisition order;
// fence counters survive release.
func testFenceMonotonic(t *testing.T, b locking.Backend) {
	const n = 100
	fences := make([]string, 0, n)
	for i := range n {
		r := MustAcquire(t, b, "fenced", 10*time.Second)
		if !fenceForm.MatchString(r.Fence) {
			t.Fatalf("acquire %d: fence %q is not 15 digits", i, r.Fence)
		}
		if i > 0 && r.Fence <= fences[i-1] {
			t.Fatalf("acquire %d: fence %s is not above the previous %s (counter reset or reused after release?)", i, r.Fence, fences[i-1])
		}
		fences = append(fences, r.Fence)
		mustRelease(t, b, r.LockID)
	}
	sorted := slices.Clone(fences)
	slices.Sort(sorted)
	if !slices.Equal(sorted, fences) {
		t.Error("lexicographic order of the fences differs from acquisition order")
	}
	// Another key has its own counter, and does not disturb this one.
	MustAcquire(t, b, "fenced-other", 10*time.Second)
	if r := MustAcquire(t, b, "fenced", 10*time.Second); r.Fence <= fences[n-1] {
		t.Errorf("fence after another key's acquire: %s, not above %s", r.Fence, fences[n-1])
	}
}

// testFenceSurvivesExpiry: a lock taken over after expiry (not release)
// gets a larger fence too.
func testFenceSurvivesExpiry(t *testing.T, b locking.Backend) {
	r1 := MustAcquire(t, b, "expiring-fence", 50*time.Millisecond)
	awaitExpiry(t, b, "expiring-fence", r1.ExpiresAt, "past the expiry")
	r2 := MustAcquire(t, b, "expiring-fence", 10*time.Second)
	if r2.Fence <= r1.Fence {
		t.Errorf("fence after expiry %s, not above %s", r2.Fence, r1.Fence)
	}
}

// testJSONRoundTrip: fence values (and the results and lock info that
// carry them) serialize through JSON without precision loss or format
// change.
func testJSONRoundTrip(t *testing.T, b locking.Backend) {
	r := MustAcquire(t, b, "json", 10*time.Second)
	info, err := b.LookupLockID(t.Context(), r.LockID)
	if err != nil || info == nil {
		t.Fatalf("LookupLockID = %+v, %v", info, err)
	}
	var r2 locking.AcquireResult
	roundTrip(t, r, &r2)
	if r2.OK != r.OK || r2.LockID != r.LockID || r2.Fence != r.Fence || !r2.ExpiresAt.Equal(r.ExpiresAt) {
		t.Errorf("AcquireResult JSON round trip: %+v, want %+v", sanitize(r2), sanitize(r))
	}
	var info2 locking.LockInfo
	roundTrip(t, *info, &info2)
	if info2.Fence != info.Fence || info2.KeyHash != info.KeyHash || info2.LockIDHash != info.LockIDHash ||
		!info2.ExpiresAt.Equal(info.ExpiresAt) || !info2.AcquiredAt.Equal(info.AcquiredAt) {
		t.Errorf("LockInfo JSON round trip: %+v, want %+v", info2, *info)
	}
	var f string
	roundTrip(t, r.Fence, &f)
	if f != r.Fence {
		t.Errorf("fence JSON round trip: %q, want %q", f, r.Fence)
	}
}

func roundTrip(t *testing.T, in, out any) {
	t.Helper()
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatalf("json.Marshal(%T): %v", in, err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("json.Unmarshal into %T: %v", out, err)
	}
}

// testReleaseAtMostOnce: release of a live lock returns true and frees
// it; a second release returns false (no error); extend and lookup of the
// released lockId find nothing; the key can be acquired again.
func testReleaseAtMostOnce(t *testing.T, b locking.Backend) {
	ctx := t.Context()
	r := MustAcquire(t, b, "release-once", 10*time.Second)
	mustRelease(t, b, r.LockID)
	wantLocked(t, b, "release-once", false, "after release")
	if ok, err := b.Release(ctx, r.LockID); ok || err != nil {
		t.Errorf("second Release = %v, %v; want false, nil", ok, err)
	}
	if e, err := b.Extend(ctx, r.LockID, 10*time.Second); e.OK || err != nil {
		t.Errorf("Extend after release = %+v, %v; want not OK, nil", e, err)
	}
	wantLocked(t, b, "release-once", false, "after extend of a released lock (resurrected?)")
	if info, err := b.LookupLockID(ctx, r.LockID); info != nil || err != nil {
		t.Errorf("LookupLockID after release = %+v, %v; want nil, nil", info, err)
	}
	if info, err := b.LookupKey(ctx, "release-once"); info != nil || err != nil {
		t.Errorf("LookupKey after release = %+v, %v; want nil, nil", info, err)
	}
	r2 := MustAcquire(t, b, "release-once", 10*time.Second)
	// The stale lockId cannot release the new holder.
	if ok, err := b.Release(ctx, r.LockID); ok || err != nil {
		t.Errorf("third Release (key re-acquired by another lock) = %v, %v; want false, nil", ok, err)
	}
	wantLocked(t, b, "release-once", true, "after a stale release")
	mustRelease(t, b, r2.LockID)
}

// testConcurrentRelease: of many concurrent releases of one lock, exactly
// one succeeds (at-most-once effect).
func testConcurrentRelease(t *testing.T, b locking.Backend) {
	const n = 8
	for round := range 2 {
		key := fmt.Sprintf("concurrent-release-%d", round)
		r := MustAcquire(t, b, key, 10*time.Second)
		var ok atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range n {
			wg.Go(func() {
				<-start
				released, err := b.Release(t.Context(), r.LockID)
				if err != nil {
					// Contention may surface as ServiceUnavailable; the
					// at-most-once property is what this checks.
					t.Logf("round %d: concurrent Release error: %v", round, err)
				}
				if released {
					ok.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if got := ok.Load(); got != 1 {
			t.Errorf("round %d: %d of %d concurrent releases of one lock succeeded; want exactly 1", round, got, n)
		}
		wantLocked(t, b, key, false, "after concurrent releases")
	}
}

// testForeignLockID: release and extend with a well-formed lockId that
// names no lock return false without error and change nothing; lookup
// returns nil.
func testForeignLockID(t *testing.T, b locking.Backend) {
	ctx := t.Context()
	r := MustAcquire(t, b, "foreign", 10*time.Second)
	foreign, err := backendkit.NewLockID()
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Release(ctx, foreign); ok || err != nil {
		t.Errorf("Release(unknown lockId) = %v, %v; want false, nil", ok, err)
	}
	if e, err := b.Extend(ctx, foreign, time.Minute); e.OK || err != nil {
		t.Errorf("Extend(unknown lockId) = %+v, %v; want not OK, nil", e, err)
	}
	if info, err := b.LookupLockID(ctx, foreign); info != nil || err != nil {
		t.Errorf("LookupLockID(unknown lockId) = %+v, %v; want nil, nil", info, err)
	}
	info, err := b.LookupLockID(ctx, r.LockID)
	if err != nil || info == nil || info.Fence != r.Fence || !info.ExpiresAt.Equal(r.ExpiresAt) {
		t.Errorf("the held lock after foreign release/extend: %+v, %v; want fence %s, expiry %v", info, err, r.Fence, r.ExpiresAt)
	}
	if info, err := b.LookupKey(ctx, "never-locked"); info != nil || err != nil {
		t.Errorf("LookupKey(free key) = %+v, %v; want nil, nil", info, err)
	}
	wantLocked(t, b, "never-locked", false, "free key")
}
