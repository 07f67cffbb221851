package main

import (
	"errors"

	"github.com/snapwriter/snapwriter/loadtest"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/outcome"
	"github.com/snapwriter/snapwriter/snapshot"
)

// Exit codes: the CLI's contract, as README.md ("Exit codes") and
// docs/cli.md list them. exitCode and dateExit below are the one place an
// error or a date's outcome becomes one.
const (
	exitOK       = 0
	exitError    = 1 // a runtime failure: a store failed or did not answer, the manifest was not recorded, the snapshot or district asked for is not stored, …
	exitUsage    = 2 // bad flags or invalid input: nothing written
	exitPartial  = 3 // the manifest records what was not written; repair completes it
	exitLockHeld = 4 // another writer held the lock throughout --lock-wait
	exitFenced   = 5 // a newer writer took the snapshot over; its data is intact
	// exitNotIntact: verify found the stored snapshot contradicting its
	// manifest, its content hashes or the input.
	exitNotIntact = 6
	// exitNotReady: the input is not ready — an upload still in progress
	// (a gs:// folder whose manifest.json does not say writeComplete:
	// true), an object replaced while it was read, an input
	// --wait-for-input waited for in vain, or no dated input for a
	// backfill. Nothing was written; the input is not wrong, so a later
	// run may succeed.
	exitNotReady = 7
	// exitSignal plus the signal's number is the exit code of a loadtest a
	// signal stopped (after its cleanup): the shell's convention.
	exitSignal = 128
)

// The CLI's own reasons to end, beside the libraries' sentinels.
var (
	// errIncomplete: get or verify found a snapshot whose write is not
	// complete; what was printed holds only the districts written.
	errIncomplete = errors.New("snapshot incomplete")
	// errNotIntact: verify found problems.
	errNotIntact = errors.New("snapshot not intact")
	// errNoInput: a backfill found no dated input in its window.
	errNoInput = errors.New("no dated input")
)

// datesError ends a backfill or a prune whose worst date did not end
// well, once its report is out: the exit code is that date's (dateExit).
type datesError struct {
	worst outcome.Outcome
	err   error // the worst date's error; nil when the report keeps only its text
	msg   string
}

func (e datesError) Error() string { return e.msg }

// signalError ends a command a signal stopped, once it has cleaned up.
type signalError struct {
	signal int
	err    error
}

func (e signalError) Error() string { return e.err.Error() }
func (e signalError) Unwrap() error { return e.err }

// exitCode is the exit code of a command that ended with err. The rows
// are checked in order, since an error can match more than one: an input
// waited for in vain is not ready and invalid; a lease lost mid-write is
// partial and lock lost.
func exitCode(err error) int {
	var dates datesError
	var sig signalError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &dates):
		return dateExit(dates.worst, dates.err)
	case errors.As(err, &sig):
		return exitSignal + sig.signal
	case errors.Is(err, model.ErrNotReady), errors.Is(err, errNoInput):
		return exitNotReady
	case errors.As(err, new(usageError)), errors.Is(err, model.ErrInvalid), errors.Is(err, snapshot.ErrMismatch),
		errors.Is(err, loadtest.ErrRefused):
		return exitUsage
	case errors.Is(err, snapshot.ErrFencedOut):
		return exitFenced
	case errors.Is(err, snapshot.ErrLockHeld), errors.Is(err, loadtest.ErrBusy):
		return exitLockHeld
	case errors.Is(err, snapshot.ErrManifestNotRecorded), errors.Is(err, snapshot.ErrRootFailed):
		return exitError
	case errors.Is(err, snapshot.ErrNotFound), errors.Is(err, snapshot.ErrNoDistrict):
		// The snapshot get or verify reads, or get's district, is not
		// stored: 1, as the README's row says.
		return exitError
	case errors.Is(err, errNotIntact):
		return exitNotIntact
	case errors.Is(err, snapshot.ErrPartial), errors.Is(err, errIncomplete), errors.Is(err, loadtest.ErrPartialRounds):
		return exitPartial
	}
	return exitError
}

// dateExit is the exit code of a date of a backfill or prune that ended
// in o with err: the code a write (or prune) of that date alone would have
// ended with. A run exits with its worst date's (outcome.Severity ranks
// them: 1 over 7 over 5 over 4 over 3 over 0).
func dateExit(o outcome.Outcome, err error) int {
	switch o {
	case outcome.Partial:
		return exitPartial
	case outcome.LockHeld:
		return exitLockHeld
	case outcome.FencedOut:
		return exitFenced
	case outcome.NotReady:
		return exitNotReady
	case outcome.Failed:
		// 1, or 2 for an input that became invalid after the check.
		return max(exitCode(err), exitError)
	}
	if o.Severity() == 0 {
		return exitOK
	}
	return exitError // NotStarted
}

// notFoundError is a refusal to read what is not stored, in the CLI's
// words; it wraps the library's ErrNotFound or ErrNoDistrict, exit 1.
type notFoundError struct {
	msg string
	err error
}

func (e notFoundError) Error() string { return e.msg }
func (e notFoundError) Unwrap() error { return e.err }
