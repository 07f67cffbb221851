// Package locking is a fenced distributed lock, independent of where the
// locks are stored: Acquire and Do take a lock and keep it alive, a Lease
// says when it is lost, and every holder gets a fence token to stamp on
// what it writes. Backends (firestorelock, pglock) store the locks; they
// implement Backend, the small single-attempt interface this package
// builds on, and are compatible with SyncGuard's TypeScript backends, so
// services in both languages can share locks.
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
// A fence is a 15-digit decimal string that strictly increases per key
// across acquisitions; writers stamp it on what they write so storage can
// refuse a writer whose lock has since passed to someone else (a lease can
// be lost without its holder noticing in time: a pause, a partition).
// Compare fences as strings (a > b), never as numbers.
//
// Keys are strings of at most MaxKeyBytes, normalised to Unicode NFC, so
// canonically equivalent spellings are one lock. Errors and logs name keys
// and lockIds only by HashKey: a key may carry user data, and a lockId is
// the capability to release a lock.
//
// Diagnostics: Owns, GetByKey and GetByID read a lock's sanitized
// LockInfo (hashes only, safe to log); GetByKeyRaw, GetByIDRaw and
// LookupDebug add the raw key and lockId on backends that implement
// DebugLookuper, for debugging only. For operators' tools, GetStatus
// describes the lock on a key and ForceRelease releases a lock on its
// holder's behalf, both as values shaped for JSON output. WithTelemetry
// decorates a backend to report every operation as an Event, off the
// caller's path.
//
// Nothing here imports a database driver. To write a backend of your own,
// see locking/backendkit for the shared pieces and locking/locktest for
// the conformance suite every backend should pass.
package locking
