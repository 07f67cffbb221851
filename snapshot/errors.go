package snapshot

import (
	"errors"
	"fmt"
)

// The endings of a write, repair or prune that the snapshot package
// names, for errors.Is, so that callers can tell what to do about them
// (repair, wait, look into another writer). The library's messages say
// what happened; what the user of a program should run or pass about it is
// the program's to say (cmd/snapwriter adds it by the sentinel matched).
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
	ErrPartial = errors.New("snapshot written partially")
	// ErrLockHeld: another writer holds the snapshot's lock and did not
	// let go within the lock wait. Nothing was written.
	ErrLockHeld = errors.New("snapshot lock is held by another writer")
	// ErrFencedOut: a writer with a newer fence wrote this snapshot.
	// Whatever this writer had not committed was refused; the newer
	// writer's data is intact.
	ErrFencedOut = errors.New("fenced out by a newer writer")
	// ErrLockLost: this writer's lease ended mid-write (the lock could not
	// be renewed before it expired) and no newer writer has written the
	// snapshot. No chunk was started after the loss; what was committed
	// before it is recorded in the manifest, and Repair completes the rest.
	ErrLockLost = errors.New("lost the lock")
	// ErrManifestNotRecorded: the write's outcome could not be recorded in
	// the root document, which still describes a write in progress.
	// Repair (or writing the snapshot again) completes it.
	ErrManifestNotRecorded = errors.New("the manifest was not recorded")
	// ErrLockBackendSwitch: the snapshot was written under a different
	// lock backend, whose fences are not comparable with ours: only a
	// writer WithAllowLockBackendSwitch replaces it.
	ErrLockBackendSwitch = errors.New("snapshot was written under a different lock backend")
	// ErrLockKeySwitch: the snapshot was written under another lock key
	// (on the same backend), whose fences are not comparable with ours:
	// only a writer WithAllowLockBackendSwitch replaces it.
	ErrLockKeySwitch = errors.New("snapshot was written under a different lock key")
	// ErrRootFailed: the root document could not be written, so no
	// district was attempted.
	ErrRootFailed = errors.New("root document write failed")
	// ErrTimeout: the lock store did not answer within the lock wait plus
	// the request timeout. Nothing was written.
	ErrTimeout = errors.New("no answer from the lock store")
	// ErrNothingWritten: the write ended before its root document was
	// written (with ErrLockLost: the lease was lost first), so the stored
	// snapshot is as it was. Writing it again is all there is to do.
	ErrNothingWritten = errors.New("nothing was written")
	// ErrMismatch: the input given to Repair is not the snapshot that was
	// written (other districts, another root payload, or districts whose
	// stored, intact documents hold other data). Nothing was written.
	ErrMismatch = errors.New("input does not match the stored snapshot")
)

// sentinels are the endings above by name: the name the telemetry gives
// an error that matches one (errorType).
var sentinels = []struct {
	err  error
	name string
}{
	{ErrPartial, "Partial"}, {ErrLockHeld, "LockHeld"}, {ErrFencedOut, "FencedOut"}, {ErrLockLost, "LockLost"},
	{ErrManifestNotRecorded, "ManifestNotRecorded"}, {ErrLockBackendSwitch, "LockBackendSwitch"},
	{ErrLockKeySwitch, "LockKeySwitch"}, {ErrRootFailed, "RootFailed"}, {ErrTimeout, "Timeout"},
	{ErrNothingWritten, "NothingWritten"}, {ErrMismatch, "Mismatch"},
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

// sentinelName is the name of the first of the sentinels that err wraps,
// in the order errors.Is visits them (the outermost first); "" when it
// wraps none.
func sentinelName(err error) string {
	for _, s := range sentinels {
		if err == s.err {
			return s.name
		}
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return sentinelName(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if name := sentinelName(e); name != "" {
				return name
			}
		}
	}
	return ""
}

// withID is err as snapshot id's error: an *Error when err matches a
// sentinel (its message unchanged but for the id before it), else err
// wrapped with the id.
func withID(id string, err error) error {
	if sentinelName(err) != "" {
		return &Error{ID: id, Err: err}
	}
	return fmt.Errorf("snapshot %s: %w", id, err)
}
