package snapshot

import (
	"errors"
	"fmt"
	"strconv"
)

// Kind classifies how a write or repair failed, so that callers can tell
// what to do about it (repair, wait, look into another writer). The
// library's messages say what happened; what the user of a program should
// run or pass about it is the program's to say (cmd/snapwriter adds it
// keyed on the Kind).
type Kind int

// The kinds. One error may match several (errors.Is): a lease lost mid-write
// is Partial and LockLost, a manifest not recorded with the lease lost is
// ManifestNotRecorded and LockLost, a lease lost before the root is
// LockLost and NothingWritten.
const (
	// Partial: the snapshot is incomplete — chunks failed, the write was
	// stopped, or the lock was lost — and its manifest records which
	// districts were written. The Result returned beside it says the same;
	// Repair completes the snapshot. A fenced-out write, one whose manifest
	// was not recorded and one whose root failed are not Partial: they are
	// FencedOut, ManifestNotRecorded and RootFailed.
	Partial Kind = iota + 1
	// LockHeld: another writer holds the snapshot's lock and did not let
	// go within the lock wait. Nothing was written.
	LockHeld
	// FencedOut: a writer with a newer fence wrote this snapshot. Whatever
	// this writer had not committed was refused; the newer writer's data is
	// intact.
	FencedOut
	// LockLost: this writer's lease ended mid-write (the lock could not be
	// renewed before it expired) and no newer writer has written the
	// snapshot. No chunk was started after the loss; what was committed
	// before it is recorded in the manifest, and Repair completes the rest.
	LockLost
	// ManifestNotRecorded: the write's outcome could not be recorded in
	// the root document, which still describes a write in progress. Repair
	// (or writing the snapshot again) completes it.
	ManifestNotRecorded
	// LockBackendSwitch: the snapshot was written under a different lock
	// backend, whose fences are not comparable with ours: only a writer
	// WithAllowLockBackendSwitch replaces it.
	LockBackendSwitch
	// LockKeySwitch: the snapshot was written under another lock key (on
	// the same backend), whose fences are not comparable with ours: only a
	// writer WithAllowLockBackendSwitch replaces it.
	LockKeySwitch
	// RootFailed: the root document could not be written, so no district
	// was attempted.
	RootFailed
	// Timeout: the lock store did not answer within the lock wait plus the
	// request timeout. Nothing was written.
	Timeout
	// NothingWritten: the write ended before its root document was written
	// (with LockLost: the lease was lost first), so the stored snapshot is
	// as it was. Writing it again is all there is to do.
	NothingWritten
	// Mismatch: the input given to Repair is not the snapshot that was
	// written (other districts, another root payload, or districts whose
	// stored, intact documents hold other data). Nothing was written.
	Mismatch
)

// String returns the kind's name, as its constant spells it.
func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

var kindNames = map[Kind]string{
	Partial: "Partial", LockHeld: "LockHeld", FencedOut: "FencedOut", LockLost: "LockLost",
	ManifestNotRecorded: "ManifestNotRecorded", LockBackendSwitch: "LockBackendSwitch", LockKeySwitch: "LockKeySwitch",
	RootFailed: "RootFailed", Timeout: "Timeout", NothingWritten: "NothingWritten", Mismatch: "Mismatch",
}

// kindTexts are the kinds as messages say them.
var kindTexts = map[Kind]string{
	Partial:             "snapshot written partially",
	LockHeld:            "snapshot lock is held by another writer",
	FencedOut:           "fenced out by a newer writer",
	LockLost:            "lost the lock",
	ManifestNotRecorded: "the manifest was not recorded",
	LockBackendSwitch:   "snapshot was written under a different lock backend",
	LockKeySwitch:       "snapshot was written under a different lock key",
	RootFailed:          "root document write failed",
	Timeout:             "no answer from the lock store",
	NothingWritten:      "nothing was written",
	Mismatch:            "input does not match the stored snapshot",
}

// Error is the error a write or repair ends with when it did not complete
// for a reason the snapshot package names (a Kind). Errors it has no Kind
// for — invalid input (model.ErrInvalid), a lock store's failure
// (*locking.Error), a context's end — come wrapped with the snapshot's id,
// and are matched by what they wrap. The causes, a Firestore status or a
// *locking.Error among them, stay reachable with errors.Is and errors.As.
type Error struct {
	Kind Kind
	ID   string // the snapshot's id, when known
	// Err is the cause, with what is known of it (nil for a sentinel).
	// When it says the kind itself (it wraps the kind's sentinel), the
	// message does not repeat it.
	Err error
}

// Error renders as "snapshot <id>: <kind>: <cause>".
func (e *Error) Error() string {
	s := ""
	if e.ID != "" {
		s = "snapshot " + e.ID + ": "
	}
	text, ok := kindTexts[e.Kind]
	if !ok {
		text = e.Kind.String()
	}
	switch {
	case e.Err == nil:
		return s + text
	case errors.Is(e.Err, &Error{Kind: e.Kind}):
		return s + e.Err.Error()
	}
	return s + text + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is a sentinel (an *Error with neither id nor
// cause) of the same kind, so errors.Is(err, ErrPartial) matches any
// partial write whatever its snapshot or cause.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Err == nil && t.ID == "" && t.Kind == e.Kind
}

// Sentinels for errors.Is, one per Kind. They are never modified.
var (
	ErrPartial             error = &Error{Kind: Partial}
	ErrLockHeld            error = &Error{Kind: LockHeld}
	ErrFencedOut           error = &Error{Kind: FencedOut}
	ErrLockLost            error = &Error{Kind: LockLost}
	ErrManifestNotRecorded error = &Error{Kind: ManifestNotRecorded}
	ErrLockBackendSwitch   error = &Error{Kind: LockBackendSwitch}
	ErrLockKeySwitch       error = &Error{Kind: LockKeySwitch}
	ErrRootFailed          error = &Error{Kind: RootFailed}
	ErrTimeout             error = &Error{Kind: Timeout}
	ErrNothingWritten      error = &Error{Kind: NothingWritten}
	ErrMismatch            error = &Error{Kind: Mismatch}
)

// withID is err as snapshot id's error: an *Error of err's kind when err
// has one (its message unchanged but for the id before it), else err
// wrapped with the id.
func withID(id string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return &Error{Kind: e.Kind, ID: id, Err: err}
	}
	return fmt.Errorf("snapshot %s: %w", id, err)
}
