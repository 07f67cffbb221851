// Package locktest is a conformance suite for locking.Backend
// implementations: it checks, through the public locking API only, what
// every backend must guarantee for Acquire, Do and Lease to be safe on it
// (the requirements of SyncGuard's lock interface, with 15-digit fences,
// NFC keys of at most 512 bytes, and an Aborted code for cancelled
// contexts).
//
// A backend author calls Run from a test in the backend's package, with a
// factory that returns a fresh, isolated backend for each subtest (its own
// database, project, schema, collections or key prefix, as suits the
// storage), so that subtests can run in parallel without seeing each
// other's locks:
//
//	func TestConformance(t *testing.T) {
//		locktest.Run(t, func(t *testing.T) locking.Backend {
//			b, err := mybackend.New(newIsolatedClient(t))
//			if err != nil {
//				t.Fatal(err)
//			}
//			return b
//		})
//	}
//
// The suite uses real time: it expires locks by waiting (short TTLs plus
// locking.TimeTolerance), so the backend's time authority must be the real
// clock, within a few milliseconds of the test process's. Subtests run in
// parallel; on the Firestore emulator under -race the suite takes about
// 25 s, mostly the contention subtests (the emulator serialises contended
// transactions slowly) and waits for expiry. It is meant to pass under
// -race.
//
// If the backend the factory returns also implements RecordCounter, the
// suite additionally checks that rejected operations (invalid keys, TTLs
// or lockIds; cancelled contexts) and lookups write nothing to storage.
//
// Every subtest names the requirement it checks in its doc comment;
// a failure message names the operation, the inputs (by hash where they
// are identifiers) and what the backend returned.
package locktest

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/locking"
)

// RecordCounter is optionally implemented by the backend a Run factory
// returns (typically a test wrapper embedding the real backend) so the
// suite can verify that an operation wrote nothing: CountRecords returns
// how many records (lock documents, fence counters, rows, keys) the
// backend's isolated storage holds.
type RecordCounter interface {
	CountRecords(ctx context.Context) (int, error)
}

// fenceForm is the fence format: 15 zero-padded decimal digits.
var fenceForm = regexp.MustCompile(`^[0-9]{15}$`)

// lockIDForm is the lockId format: 22 base64url characters.
var lockIDForm = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)

const (
	// tolerance is the liveness predicate's slack after expiry.
	tolerance = locking.TimeTolerance
	// margin is how far past a time boundary the suite waits before
	// asserting which side of it the backend is on.
	margin = 250 * time.Millisecond
	// cancelBound is how soon an operation must return once its context
	// is cancelled.
	cancelBound = 500 * time.Millisecond
)

// check is one subtest of the suite.
type check struct {
	name string
	run  func(t *testing.T, b locking.Backend)
}

// checks lists the suite; each runs in parallel on its own backend.
var checks = []check{
	{"Capabilities", testCapabilities},
	{"AcquireResult", testAcquireResult},
	{"Contention", testContention},
	{"FenceMonotonic", testFenceMonotonic},
	{"FenceSurvivesExpiry", testFenceSurvivesExpiry},
	{"JSONRoundTrip", testJSONRoundTrip},
	{"ReleaseAtMostOnce", testReleaseAtMostOnce},
	{"ConcurrentRelease", testConcurrentRelease},
	{"ForeignLockID", testForeignLockID},
	{"ExtendResetsExpiry", testExtendResetsExpiry},
	{"ExtendKeepsAlive", testExtendKeepsAlive},
	{"NoResurrection", testNoResurrection},
	{"LivenessTolerance", testLivenessTolerance},
	{"StaleOwnerAfterTakeover", testStaleOwnerAfterTakeover},
	{"TOCTOURace", testTOCTOURace},
	{"KeyNormalization", testKeyNormalization},
	{"KeyLengthLimit", testKeyLengthLimit},
	{"InvalidKeys", testInvalidKeys},
	{"InvalidLockIDs", testInvalidLockIDs},
	{"InvalidTTL", testInvalidTTL},
	{"LookupReadOnly", testLookupReadOnly},
	{"LookupSanitized", testLookupSanitized},
	{"CancelledContext", testCancelledContext},
	{"CancelInFlight", testCancelInFlight},
	{"MutualExclusionAcquire", testMutualExclusionAcquire},
	{"MutualExclusionDo", testMutualExclusionDo},
}

// Run runs the conformance suite against the backends newBackend returns:
// one parallel subtest per requirement, each with a backend of its own.
// newBackend is called from within the subtest (so it may use t.Cleanup,
// t.Fatal and t.Name) and must return a backend whose storage no other
// subtest shares.
func Run(t *testing.T, newBackend func(t *testing.T) locking.Backend) {
	t.Helper()
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newBackend(t)
			if b == nil {
				t.Fatal("newBackend returned nil")
			}
			c.run(t, b)
		})
	}
}

// MustAcquire acquires key for ttl and fails the test unless it got it.
func MustAcquire(t *testing.T, b locking.Backend, key string, ttl time.Duration) locking.AcquireResult {
	t.Helper()
	r, err := b.Acquire(t.Context(), key, ttl)
	if err != nil || !r.OK {
		t.Fatalf("Acquire(key %s, %s) = %+v, %v; want OK", locking.HashKey(key), ttl, sanitize(r), err)
	}
	return r
}

// mustRelease releases lockID and fails the test unless it was released.
func mustRelease(t *testing.T, b locking.Backend, lockID string) {
	t.Helper()
	if ok, err := b.Release(t.Context(), lockID); !ok || err != nil {
		t.Fatalf("Release(lockId %s) = %v, %v; want true", locking.HashKey(lockID), ok, err)
	}
}

// wantLocked fails the test unless IsLocked(key) reports want.
func wantLocked(t *testing.T, b locking.Backend, key string, want bool, when string) {
	t.Helper()
	got, err := b.IsLocked(t.Context(), key)
	if err != nil || got != want {
		t.Errorf("%s: IsLocked(key %s) = %v, %v; want %v", when, locking.HashKey(key), got, err, want)
	}
}

// wantCode fails the test unless err matches sentinel with errors.Is.
func wantCode(t *testing.T, err, sentinel error, what string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Errorf("%s: error %v; want one matching %v", what, err, sentinel)
	}
}

// sanitize returns r with its lockId replaced by its hash, for messages.
func sanitize(r locking.AcquireResult) locking.AcquireResult {
	if r.LockID != "" {
		r.LockID = "hash:" + locking.HashKey(r.LockID)
	}
	return r
}

// records returns the backend's record count, or -1 if it cannot say.
func records(t *testing.T, b locking.Backend) int {
	t.Helper()
	rc, ok := b.(RecordCounter)
	if !ok {
		return -1
	}
	n, err := rc.CountRecords(t.Context())
	if err != nil {
		t.Fatalf("CountRecords: %v", err)
	}
	return n
}

// wantRecords fails the test if the backend can count its records and
// holds other than want (-1: cannot count, nothing to check).
func wantRecords(t *testing.T, b locking.Backend, want int, when string) {
	t.Helper()
	if want < 0 {
		return
	}
	if got := records(t, b); got != want {
		t.Errorf("%s: storage holds %d records, had %d: something was written", when, got, want)
	}
}

// sleepUntil sleeps until d (not at all if d has passed). The suite runs
// against real storage with a real clock, so where it needs time to pass
// (a lock to expire, a call to land near an instant) it has to wait.
func sleepUntil(d time.Time) { time.Sleep(time.Until(d)) }

// pollEvery is how often awaitExpiry asks the backend.
const pollEvery = 10 * time.Millisecond

// awaitExpiry waits for the lock on key, which expires at expiresAt, to be
// gone: until its liveness tolerance has passed (no backend may free it
// sooner), then polling IsLocked until it reports false, which it must
// within margin. when names the moment in the failure message.
func awaitExpiry(t *testing.T, b locking.Backend, key string, expiresAt time.Time, when string) {
	t.Helper()
	sleepUntil(expiresAt.Add(tolerance))
	deadline := expiresAt.Add(tolerance + margin)
	for {
		locked, err := b.IsLocked(t.Context(), key)
		if err == nil && !locked {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: IsLocked(key %s) = %v, %v %s past the expiry; want false by %s past it",
				when, locking.HashKey(key), locked, err, time.Since(expiresAt).Round(time.Millisecond), tolerance+margin)
		}
		time.Sleep(pollEvery)
	}
}

// Within reports whether got is within slack of [lo, hi].
func Within(got, lo, hi time.Time, slack time.Duration) bool {
	return !got.Before(lo.Add(-slack)) && !got.After(hi.Add(slack))
}

// clockSlack is how far the backend's reported times may stray from the
// test's clock: a few ms of rounding for client time, the liveness
// tolerance for a server clock.
func clockSlack(b locking.Backend) time.Duration {
	if b.Capabilities().TimeAuthority == "client" {
		return 100 * time.Millisecond
	}
	return tolerance
}
