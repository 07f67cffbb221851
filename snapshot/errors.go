package snapshot

import (
	"errors"
	"fmt"
	"strings"

	"github.com/snapwriter/snapwriter/gate"

	"github.com/snapwriter/snapwriter/internal/ending"
)

// The endings of a write, repair or prune that the snapshot package
// names, for errors.Is, so that callers can tell what to do about them
// (repair, wait, look into another writer). The library's messages say
// what happened; what the user of a program should run or pass about it is
// the program's to say (cmd/snapwriter adds it from the table of endings,
// internal/ending, which also names them for the telemetry).
// One error may match several: a lease lost mid-write is ErrPartial and
// ErrLockLost, a manifest not recorded with the lease lost is
// ErrManifestNotRecorded and ErrLockLost, a lease lost before the root is
// ErrLockLost and ErrNothingWritten. They are never modified.
var (
	// ErrPartial: the snapshot is incomplete — chunks failed, the write
	// was stopped, or the lock was lost — and its manifest records which
	// districts were written. The Result returned beside it says the same;
	// Repair completes the snapshot. A fenced-out write, one whose manifest
	// was not recorded and one whose root failed are not partial: they are
	// ErrFencedOut, ErrManifestNotRecorded and ErrRootFailed.
	ErrPartial = ending.ErrPartial
	// ErrLockHeld: another writer holds the snapshot's lock and did not
	// let go within the lock wait. Nothing was written.
	ErrLockHeld = ending.ErrLockHeld
	// ErrFencedOut: a writer with a newer fence wrote this snapshot.
	// Whatever this writer had not committed was refused; the newer
	// writer's data is intact.
	ErrFencedOut = ending.ErrFencedOut
	// ErrLockLost: this writer's lease ended mid-write (the lock could not
	// be renewed before it expired) and no newer writer has written the
	// snapshot. No chunk was started after the loss; what was committed
	// before it is recorded in the manifest, and Repair completes the rest.
	ErrLockLost = ending.ErrLockLost
	// ErrManifestNotRecorded: the write's outcome could not be recorded in
	// the root document, which still describes a write in progress.
	// Repair (or writing the snapshot again) completes it.
	ErrManifestNotRecorded = ending.ErrManifestNotRecorded
	// ErrLockBackendSwitch: the snapshot was written under a different
	// lock backend, whose fences are not comparable with ours: only a
	// writer WithAllowLockBackendSwitch replaces it.
	ErrLockBackendSwitch = ending.ErrLockBackendSwitch
	// ErrLockKeySwitch: the snapshot was written under another lock key
	// (on the same backend), whose fences are not comparable with ours:
	// only a writer WithAllowLockBackendSwitch replaces it.
	ErrLockKeySwitch = ending.ErrLockKeySwitch
	// ErrRootFailed: the root document could not be written, so no
	// district was attempted.
	ErrRootFailed = ending.ErrRootFailed
	// ErrTimeout: the lock store did not answer within the lock wait plus
	// the request timeout. Nothing was written.
	ErrTimeout = ending.ErrTimeout
	// ErrNothingWritten: the write ended before its root document was
	// written (with ErrLockLost: the lease was lost first), so the stored
	// snapshot is as it was. Writing it again is all there is to do.
	ErrNothingWritten = ending.ErrNothingWritten
	// ErrMismatch: the input given to Repair is not the snapshot that was
	// written (other districts, another root payload, or districts whose
	// stored, intact documents hold other data). Nothing was written.
	ErrMismatch = ending.ErrMismatch
)

// ErrHeld: the publication gate (WithGate) held the snapshot: its input
// has fewer districts than readers have, or values that changed where it
// allows none, or month-end deltas past their bounds. Nothing was written.
// The error is a *HeldError, whose Report says which rule held, and the
// districts and fields involved.
var ErrHeld = ending.ErrHeld

// HeldError is the error a write the gate held ends with.
type HeldError struct {
	Report *gate.Report
}

// Error says which rules held, and what: "held by the publication gate:
// count: 2 districts live in 2026-11-19 are missing (42, 57)".
func (e *HeldError) Error() string {
	msgs := make([]string, 0, len(e.Report.Holds))
	for _, h := range e.Report.Holds {
		msgs = append(msgs, string(h.Rule)+": "+h.Message)
	}
	return ErrHeld.Error() + ": " + strings.Join(msgs, "; ")
}

// Is reports whether target is ErrHeld, the ending a HeldError is.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// ErrNotFound: no snapshot is stored under that id.
var ErrNotFound = ending.ErrNotFound

// ErrNoDistrict: the snapshot is stored, but not the district asked for
// (Reader.District): the snapshot does not have it, or its write failed.
// It is not ErrNotFound, which says the snapshot itself is absent.
var ErrNoDistrict = ending.ErrNoDistrict

// ErrNewestComplete is Prune's refusal to delete the newest complete
// snapshot: a retention policy never leaves the application without one.
// Nothing was deleted.
var ErrNewestComplete = ending.ErrNewestComplete

// sentinels are the endings above: an error that matches one is an *Error
// (withID). What each is called, and what it means to the CLI, is the
// table of endings' (internal/ending).
var sentinels = []error{
	ErrPartial, ErrLockHeld, ErrFencedOut, ErrLockLost, ErrManifestNotRecorded, ErrLockBackendSwitch,
	ErrLockKeySwitch, ErrRootFailed, ErrTimeout, ErrNothingWritten, ErrMismatch, ErrHeld,
}

// Error is the error a write or repair ends with when it did not complete
// for a reason the snapshot package names: Err wraps one of the sentinels
// above, or several, and the cause. Errors it has no sentinel for —
// invalid input (model.ErrInvalid), a lock store's failure
// (*locking.Error), a context's end — come wrapped with the snapshot's id,
// and are matched by what they wrap. The causes, a Firestore status or a
// *locking.Error among them, stay reachable with errors.Is and errors.As.
type Error struct {
	ID  string // the snapshot's id, when known
	Err error  // what happened: the sentinels it matches, with the cause
}

// Error renders as "snapshot <id>: <sentinel>: <cause>".
func (e *Error) Error() string {
	msg := "<nil>"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	if e.ID == "" {
		return msg
	}
	return "snapshot " + e.ID + ": " + msg
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// newError is snapshot id's error that matches sentinel, for cause (nil:
// none). Its message says the sentinel once: "<sentinel>: <cause>", or
// only the cause when the cause matches the sentinel already.
func newError(id string, sentinel, cause error) *Error {
	switch {
	case cause == nil:
		return &Error{ID: id, Err: sentinel}
	case errors.Is(cause, sentinel):
		return &Error{ID: id, Err: cause}
	}
	return &Error{ID: id, Err: fmt.Errorf("%w: %w", sentinel, cause)}
}

// isSentinel reports whether err matches one of the sentinels above.
func isSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// withID is err as snapshot id's error: an *Error when err matches a
// sentinel (its message unchanged but for the id before it), else err
// wrapped with the id.
func withID(id string, err error) error {
	if isSentinel(err) {
		return &Error{ID: id, Err: err}
	}
	return fmt.Errorf("snapshot %s: %w", id, err)
}

// Is reports whether target is the ending a ChangedError is: the kind of
// ErrMismatch that WithRewriteChanged lifts, whose hint is its own in the
// table of endings (internal/ending).
func (e *ChangedError) Is(target error) bool { return target == ending.ErrChanged }
