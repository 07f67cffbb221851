// Package ending is the one table of the ways a write, a date of a
// backfill or prune, or a command can end. Each row names an ending by the
// sentinel error that says it, and gives every name it goes by: a date's
// outcome word (package outcome), the CLI's exit code (DESIGN.md §5, the
// README's "Exit codes"), what to run or pass about it, the level of the
// line that closes a run so ended, and the telemetry's error.type.
//
// One error can match several sentinels — a partial write whose lease was
// lost is ErrPartial and ErrLockLost, an input waited for in vain is
// not ready and invalid — so the rows are checked in one order, most
// telling first, and every reader asks Of. Adding an ending is adding a
// row.
//
// The sentinels are declared here, below every package that reads the
// table, so that snapshot (whose telemetry reads the names) and the CLI
// (which reads the rest) share it without an import cycle. Their public
// names stay their packages' own: snapshot.ErrPartial is ErrPartial, the
// same value, as os.ErrNotExist is io/fs's. Nothing in the table is
// parsed or acted on here; the exit codes and hints are words, read only
// by the CLI.
package ending

import (
	"errors"

	"go.uber.org/zap/zapcore"

	"github.com/snapwriter/snapwriter/internal/safego"
	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/model"
)

// The sentinels of package snapshot (documented there, where callers
// match them).
var (
	ErrPartial             = errors.New("snapshot written partially")
	ErrLockHeld            = errors.New("snapshot lock is held by another writer")
	ErrFencedOut           = errors.New("fenced out by a newer writer")
	ErrLockLost            = errors.New("lost the lock")
	ErrManifestNotRecorded = errors.New("the manifest was not recorded")
	ErrLockBackendSwitch   = errors.New("snapshot was written under a different lock backend")
	ErrLockKeySwitch       = errors.New("snapshot was written under a different lock key")
	ErrRootFailed          = errors.New("root document write failed")
	ErrTimeout             = errors.New("no answer from the lock store")
	ErrNothingWritten      = errors.New("nothing was written")
	ErrMismatch            = errors.New("input does not match the stored snapshot")
	ErrNotFound            = errors.New("snapshot not found")
	ErrNoDistrict          = errors.New("no such district")
	ErrNewestComplete      = errors.New("the newest complete snapshot is never pruned")
	// ErrChanged is matched by snapshot.ChangedError, the kind of
	// ErrMismatch that WithRewriteChanged lifts. Its text is never shown:
	// a ChangedError says what differs.
	ErrChanged = errors.New("the input differs from what is stored")
	// ErrHeld is matched by snapshot.HeldError: the publication gate
	// (snapshot.WithGate) held the snapshot; nothing was written.
	ErrHeld = errors.New("held by the publication gate")
)

// The sentinels of package loadtest (documented there).
var (
	ErrRefused       = errors.New("collection refused")
	ErrBusy          = errors.New("another loadtest is running on the collection")
	ErrPartialRounds = errors.New("rounds ended partial")
)

// The CLI's own endings.
var (
	// ErrUsage is matched by a bad command line: a flag, a value, an
	// argument, an environment variable.
	ErrUsage = errors.New("usage")
	// ErrIncomplete: get or verify found a snapshot whose write is not
	// complete; what was printed holds only the districts written.
	ErrIncomplete = errors.New("snapshot incomplete")
	// ErrNotIntact: verify found problems.
	ErrNotIntact = errors.New("snapshot not intact")
	// ErrNoInput: a backfill found no dated input in its window.
	ErrNoInput = errors.New("no dated input")
)

// The exit codes: the CLI's contract (DESIGN.md §5, README "Exit codes").
const (
	ExitOK       = 0
	ExitError    = 1 // a runtime failure: a store failed or did not answer, the manifest was not recorded, the snapshot or district asked for is not stored, …
	ExitUsage    = 2 // bad flags or invalid input: nothing written
	ExitPartial  = 3 // the manifest records what was not written; repair completes it
	ExitLockHeld = 4 // another writer held the lock throughout --lock-wait
	ExitFenced   = 5 // a newer writer took the snapshot over; its data is intact
	// ExitNotIntact: verify found the stored snapshot contradicting its
	// manifest, its content hashes or the input.
	ExitNotIntact = 6
	// ExitNotReady: the input is not ready — an upload still in progress
	// (a gs:// folder whose manifest.json does not say writeComplete:
	// true), an object replaced while it was read, an input
	// --wait-for-input waited for in vain, or no dated input for a
	// backfill. Nothing was written; the input is not wrong, so a later
	// run may succeed.
	ExitNotReady = 7
	// ExitHeld: the publication gate held the snapshot (write --gate): the
	// input is not what readers may be shown without a look — fewer
	// districts than are live, values changed, or month-end deltas past
	// their bounds. Nothing was written; the report says which rule held
	// and the districts and fields involved.
	ExitHeld = 8
	// ExitSignal plus the signal's number is the exit code of every
	// command a signal stopped, once it has cleaned up: 130 for SIGINT,
	// 143 for SIGTERM, the shell's convention. What the command recorded
	// (a write's manifest, a backfill's report) says how far it got. A
	// command that had finished its work when the signal came exits as
	// it finished.
	ExitSignal  = 128
	ExitSIGINT  = ExitSignal + 2
	ExitSIGTERM = ExitSignal + 15
)

// Code is one exit code and what it means, as the CLI's help, README.md
// and docs/cli.md list it (rendered from Codes).
type Code struct {
	Exit    int
	Meaning string
}

// Codes is every exit code the CLI ends with, in order, with its meaning:
// the one source of the lists in the root command's help, README.md and
// docs/cli.md.
func Codes() []Code {
	return []Code{
		{ExitOK, "success: the snapshot is complete (or what was asked is done); `diff` without `--exit-code` whatever it found"},
		{ExitError, "runtime failure: Firestore, Cloud Storage or the PostgreSQL lock database failed or did not answer within its bounds, the root document could not be written, the lock was lost before the root was written (nothing written), the manifest could not be recorded (`repair` completes it), the snapshot was written under the other lock backend, or a panic (the stack is in the log); not found: `get` or `verify` of a snapshot that is not stored, `get --district` of a district it does not hold; `lock release`: nothing released (no live lock carries the lockId, no lock on the date, or the confirmation was declined); `diff --exit-code`: the snapshots differ; `doctor`: a check found a problem (each line says the fix)"},
		{ExitUsage, "usage error or invalid input (a flag, an argument, a `SNAPWRITER_` variable, the input's content): nothing was written"},
		{ExitPartial, "partial: some chunks failed after their retries, or the writer lost its lock mid-write with no newer writer; the manifest records exactly which districts were written and `repair` completes it; `get` of a snapshot that is not complete (partial, writing, interrupted, unknown or deleting: it prints the districts stored); `verify` of an intact snapshot that is not complete; `loadtest`: a round ended partial"},
		{ExitLockHeld, "the snapshot's lock was held by another writer throughout `write --lock-wait` (`loadtest`: another loadtest holds the collection)"},
		{ExitFenced, "fenced out: a newer writer took the snapshot over; this writer wrote nothing more, and the newer writer's data is intact"},
		{ExitNotIntact, "`verify` only: the stored snapshot contradicts its manifest, its content hashes or the input"},
		{ExitNotReady, "the input is not ready (a `gs://` upload not finished, an object replaced while read, `write --wait-for-input` waited in vain, a `backfill` with no dated input): nothing was written; a later run may succeed"},
		{ExitHeld, "held by the publication gate (`write --gate`): fewer districts, changed values or month-end deltas past their bounds; nothing was written"},
		{ExitSIGINT, "stopped by SIGINT (Ctrl-C), after its cleanup: a write records its manifest (outcome partial) and releases its lock, `schedule` finishes the run in progress; a command that had already finished its work exits as it finished"},
		{ExitSIGTERM, "stopped by SIGTERM (Cloud Run, systemd), after the same cleanup"},
	}
}

// The outcome words of package outcome that the table gives (an Outcome
// is its word).
const (
	partial   = "partial"
	lockHeld  = "lock-held"
	fencedOut = "fenced-out"
	notReady  = "not-ready"
	failed    = "failed"
	kept      = "kept"
	held      = "held"
)

// The hints.
const (
	hintRepair        = "`snapwriter repair` completes it"
	hintRepairOrWrite = "`snapwriter repair` (or writing it again) completes it"
	hintBackend       = "stop every writer of the other lock backend, then rerun once with --allow-lock-backend-switch"
	hintKey           = "stop every other writer of this snapshot, then rerun once with --allow-lock-backend-switch"
	hintChanged       = "or `snapwriter repair --rewrite-changed` re-writes what differs"
	hintHeld          = "`snapwriter diff` shows what differs; once checked, rerun with --allow-value-changes to publish changed values, or without --gate to publish a removal"
)

// Ending is one way to end, and its names.
type Ending struct {
	// Err is the sentinel that says it (errors.Is); nil for None and
	// Failure.
	Err error
	// Name is the telemetry's error.type; "" for an ending the telemetry
	// names by its cause, or by the next ending the error matches.
	Name string
	// Outcome is the word of package outcome for a date that ended so;
	// "" for None, whose word the caller knows (complete, skipped, …).
	Outcome string
	// Exit is the CLI's exit code.
	Exit int
	// Hint is what the user can run or pass about it; "" when there is
	// nothing to add (the library's message says what happened).
	Hint string
	// Level is the level of the line that closes a run so ended. Every
	// ending with the same exit code has the same Level (the tests check),
	// so that a run over many dates logs its close by its exit code.
	Level zapcore.Level
}

// None is the ending of a run that ended well: no error.
var None = Ending{Exit: ExitOK, Level: zapcore.InfoLevel}

// Failure is the ending of an error that no row matches: a runtime
// failure, named by its cause.
var Failure = Ending{Outcome: failed, Exit: ExitError, Level: zapcore.WarnLevel}

const warn = zapcore.WarnLevel

// table is every ending, most telling first: Of takes the first row the
// error matches. The order decides only for errors that match more than
// one row; those that occur are:
//   - an input waited for in vain: not ready, and invalid;
//   - a ChangedError: changed, and a mismatch;
//   - a write or repair whose lease was lost also matches ErrLockLost when
//     it ended partial, not recorded, with its root failed, refused by a
//     prior writer (backend or key switch, a legacy lock held, a mismatch,
//     a snapshot not found) or fenced out: the other ending is the one;
//   - a lease lost before the root was written: lost, and nothing written;
//   - a loadtest busy: busy, and the lock's acquisition timed out.
//
// The groups: the input; refusals of what was asked (nothing written);
// another writer; the write's failures; what was written only in part;
// the lock lost; what is not stored; the lock library's own. A held
// snapshot is its own group: nothing failed, but what readers would see
// needs a person. Its one ERROR line is the write's own (the line
// operators alert on), so a run's closing line is a WARNING, as for the
// others.
var table = [...]Ending{
	// A panic recovered (package safego, or the CLI's command) says most:
	// whatever else the error matches, the program went wrong.
	{Err: safego.ErrPanic, Name: "Panic", Outcome: failed, Exit: ExitError, Level: warn},

	{Err: model.ErrNotReady, Name: "NotReady", Outcome: notReady, Exit: ExitNotReady, Level: warn},
	{Err: ErrNoInput, Name: "NoInput", Outcome: notReady, Exit: ExitNotReady, Level: warn},

	{Err: ErrHeld, Name: "GateHeld", Outcome: held, Exit: ExitHeld, Hint: hintHeld, Level: warn},

	{Err: ErrUsage, Name: "Usage", Outcome: failed, Exit: ExitUsage, Level: warn},
	{Err: ErrChanged, Name: "Mismatch", Outcome: failed, Exit: ExitUsage, Hint: hintChanged, Level: warn},
	{Err: ErrMismatch, Name: "Mismatch", Outcome: failed, Exit: ExitUsage, Level: warn},
	{Err: model.ErrInvalid, Name: "InvalidInput", Outcome: failed, Exit: ExitUsage, Level: warn},
	{Err: ErrRefused, Name: "Refused", Outcome: failed, Exit: ExitUsage, Level: warn},

	{Err: ErrFencedOut, Name: "FencedOut", Outcome: fencedOut, Exit: ExitFenced, Level: warn},
	{Err: ErrLockHeld, Name: "LockHeld", Outcome: lockHeld, Exit: ExitLockHeld, Level: warn},
	{Err: ErrBusy, Name: "Busy", Outcome: lockHeld, Exit: ExitLockHeld, Level: warn},

	{Err: ErrManifestNotRecorded, Name: "ManifestNotRecorded", Outcome: failed, Exit: ExitError, Hint: hintRepairOrWrite, Level: warn},
	{Err: ErrRootFailed, Name: "RootFailed", Outcome: failed, Exit: ExitError, Level: warn},
	{Err: ErrLockBackendSwitch, Name: "LockBackendSwitch", Outcome: failed, Exit: ExitError, Hint: hintBackend, Level: warn},
	{Err: ErrLockKeySwitch, Name: "LockKeySwitch", Outcome: failed, Exit: ExitError, Hint: hintKey, Level: warn},
	{Err: ErrTimeout, Name: "Timeout", Outcome: failed, Exit: ExitError, Level: warn},
	{Err: ErrNotIntact, Name: "NotIntact", Outcome: failed, Exit: ExitNotIntact, Level: warn},

	{Err: ErrPartial, Name: "Partial", Outcome: partial, Exit: ExitPartial, Hint: hintRepair, Level: warn},
	{Err: ErrIncomplete, Name: "Incomplete", Outcome: partial, Exit: ExitPartial, Level: warn},
	{Err: ErrPartialRounds, Name: "PartialRounds", Outcome: partial, Exit: ExitPartial, Level: warn},

	{Err: ErrLockLost, Name: "LockLost", Outcome: failed, Exit: ExitError, Level: warn},
	{Err: ErrNothingWritten, Name: "NothingWritten", Outcome: failed, Exit: ExitError, Level: warn},

	{Err: ErrNotFound, Outcome: failed, Exit: ExitError, Level: warn},
	{Err: ErrNoDistrict, Outcome: failed, Exit: ExitError, Level: warn},
	{Err: ErrNewestComplete, Outcome: kept, Exit: ExitOK, Level: zapcore.InfoLevel},

	// Below every snapshot ending, which wraps them: the telemetry names
	// the lock step's own error by them.
	{Err: locking.ErrAcquisitionTimeout, Name: "LockHeld", Outcome: lockHeld, Exit: ExitLockHeld, Level: warn},
	{Err: locking.ErrContended, Name: "Contended", Outcome: failed, Exit: ExitError, Level: warn},
}

// Of is the ending of a run that ended with err: None for nil, the first
// row err matches, else Failure.
func Of(err error) Ending {
	if err == nil {
		return None
	}
	for _, e := range table {
		if errors.Is(err, e.Err) {
			return e
		}
	}
	return Failure
}

// Name is err's error.type: the Name of the first row err matches that
// has one; "" when none has (the telemetry then names the cause).
func Name(err error) string {
	if err == nil {
		return ""
	}
	for _, e := range table {
		if e.Name != "" && errors.Is(err, e.Err) {
			return e.Name
		}
	}
	return ""
}

// ForOutcome is the first ending whose outcome word is word: the exit
// code and level a date that ended so has. Failure's word is shared by
// many exit codes; ask Of with the date's error for it.
func ForOutcome(word string) (Ending, bool) {
	for _, e := range table {
		if e.Outcome == word {
			return e, true
		}
	}
	return Ending{}, false
}

// ForExit is the ending a run that exits with code closes its log with:
// None for 0, the first row with that code, else Failure.
func ForExit(code int) Ending {
	if code == None.Exit {
		return None
	}
	for _, e := range table {
		if e.Exit == code {
			return e
		}
	}
	return Failure
}

// All is every ending, in the order Of checks them.
func All() []Ending { return append([]Ending(nil), table[:]...) }
