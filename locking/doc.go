// Package locking is the backend-neutral fenced-lock contract (the lock
// interface spec, as DESIGN §4 amends it): the Backend interface every
// storage implements, its result and error types, key normalisation and
// storage-key derivation, lockIds, fence tokens, the one liveness
// predicate, the retry formulas of the spec's lock() helper, and a Lease
// that keeps a lock alive and says when it is lost.
//
// A fence is a 15-digit decimal string that strictly increases per key
// across acquisitions; writers stamp it on what they write so storage can
// refuse a writer whose lock has since passed to someone else. Compare
// fences as strings (a > b), never as numbers.
//
// Nothing here imports a database driver; backends live in subpackages
// (firestorelock).
//
// Typical use, for a function:
//
//	err := locking.Do(ctx, backend, "report:2026-11-20", func(ctx context.Context, l *locking.Lease) error {
//		// ctx is cancelled if the lock is lost.
//		return store(ctx, report, l.Fence()) // stamp the fence on what the lock guards
//	})
//	if errors.Is(err, locking.ErrAcquisitionTimeout) { ... } // held by someone else
//
// or, holding the lock across calls:
//
//	lease, err := locking.Acquire(ctx, backend, "snapshot:2026-11-20")
//	if err != nil { ... }                      // errors.Is(err, locking.ErrAcquisitionTimeout): held
//	defer lease.Release(context.WithoutCancel(ctx))
//	ctx, cancel := lease.Context(ctx)          // cancelled if the lock is lost
//	defer cancel()
//	... write, stamping lease.Fence() ...
//	if err := lease.Err(); err != nil { ... } // lost: the write may not have been exclusive
//
// Both wait for a held lock, and retry a backend failing transiently, as
// a RetryPolicy says (WithRetry; DefaultRetryPolicy by default).
//
// Diagnostics: Owns, GetByKey and GetByID read a lock's sanitized
// LockInfo (hashes only, safe to log); GetByKeyRaw, GetByIDRaw and
// LookupDebug add the raw key and lockId on backends that implement
// DebugLookuper, for debugging only. WithTelemetry decorates a backend to
// report every operation as an Event, off the caller's path.
package locking
