package main

import (
	"context"
	"errors"

	"github.com/snapwriter/snapwriter/internal/ending"
	"github.com/snapwriter/snapwriter/internal/signals"
	"github.com/snapwriter/snapwriter/outcome"
)

// Exit codes: the CLI's contract, as README.md ("Exit codes") and
// docs/cli.md list them, and the table of endings (internal/ending) gives
// them. exitCode and dateExit below are the one place an error or a
// date's outcome becomes one.
const (
	exitOK        = ending.ExitOK
	exitError     = ending.ExitError
	exitUsage     = ending.ExitUsage
	exitPartial   = ending.ExitPartial
	exitLockHeld  = ending.ExitLockHeld
	exitFenced    = ending.ExitFenced
	exitNotIntact = ending.ExitNotIntact
	exitNotReady  = ending.ExitNotReady
	exitHeld      = ending.ExitHeld
	// exitSignal plus the signal's number is the exit code of every
	// command a signal stopped, after its cleanup: the shell's convention,
	// decided in app.run.
	exitSignal = ending.ExitSignal
)

// The CLI's own reasons to end, beside the libraries' sentinels: rows of
// the table of endings.
var (
	// errIncomplete: get or verify found a snapshot whose write is not
	// complete; what was printed holds only the districts written.
	errIncomplete = ending.ErrIncomplete
	// errNotIntact: verify found problems.
	errNotIntact = ending.ErrNotIntact
	// errNoInput: a backfill found no dated input in its window.
	errNoInput = ending.ErrNoInput
)

// datesError ends a backfill or a prune whose worst date did not end
// well, once its report is out: the exit code is that date's (dateExit).
type datesError struct {
	worst outcome.Outcome
	err   error // the worst date's error; nil when the report keeps only its text
	msg   string
}

func (e datesError) Error() string { return e.msg }

// exitCode is the exit code of a command that ended with err: a run
// over many dates exits with its worst date's, and any other error with
// its ending's (the table
// of endings checks its rows most telling first, since an error can match
// more than one: an input waited for in vain is not ready and invalid; a
// lease lost mid-write is partial and lock lost).
func exitCode(err error) int {
	var dates datesError
	if errors.As(err, &dates) {
		return dateExit(dates.worst, dates.err)
	}
	return ending.Of(err).Exit
}

// dateExit is the exit code of a date of a backfill or prune that ended
// in o with err: the code a write (or prune) of that date alone would have
// ended with, as the table of endings gives it for o. A run exits with its
// worst date's (outcome.Severity ranks them: 1 over 7 over 5 over 4 over
// 3 over 0).
func dateExit(o outcome.Outcome, err error) int {
	switch {
	case o.Severity() == 0:
		return exitOK
	case o == outcome.Failed:
		// 1, or 2 for an input that became invalid after the check.
		return max(exitCode(err), exitError)
	}
	if e, ok := ending.ForOutcome(string(o)); ok {
		return e.Exit
	}
	return exitError // NotStarted
}

// signalExit is code, or 128+n when a signal ended ctx and code is not
// 0: the exit code a report states is the one the process ends with, by
// app.run's rule — a run a signal stopped ends 128+n, one that had
// finished its work when the signal came ends as it finished.
func signalExit(ctx context.Context, code int) int {
	if sig := signals.Received(ctx); sig != 0 && code != exitOK {
		return exitSignal + int(sig)
	}
	return code
}

// notFoundError is a refusal to read what is not stored, in the CLI's
// words; it wraps the library's ErrNotFound or ErrNoDistrict, exit 1.
type notFoundError struct {
	msg string
	err error
}

func (e notFoundError) Error() string { return e.msg }
func (e notFoundError) Unwrap() error { return e.err }
