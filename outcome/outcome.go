// Package outcome names how one date of a run over many snapshots ended —
// a backfill's writes, a prune's deletions — in one vocabulary, ranked by
// what an operator must do about it. Package backfill and package
// retention report their dates with it.
//
// It is not snapshot.Outcome: that says what one write left stored
// (complete, partial, not recorded, not written, …), whatever the caller
// makes of it. A date's Outcome says what to do next, and has endings no
// write has: an input not ready, a date the run never reached, a snapshot
// kept or already gone.
package outcome

import "github.com/snapwriter/snapwriter/internal/ending"

// Outcome is how one date ended. Its string is its spelling in reports,
// JSON and text alike.
type Outcome string

// The outcomes. The first ones need nothing more (Severity 0); the rest
// are ranked by Severity.
const (
	// Complete: the date was written, every district of it.
	Complete Outcome = "complete"
	// Skipped: the stored snapshot was already complete; nothing written.
	Skipped Outcome = "skipped"
	// WouldPrune: a dry run selected the date; nothing was done.
	WouldPrune Outcome = "would-prune"
	// Pruned: the snapshot was deleted.
	Pruned Outcome = "pruned"
	// Gone: nothing was stored when the date's turn came.
	Gone Outcome = "already-gone"
	// Kept: the snapshot became the newest complete one, which is never
	// deleted.
	Kept Outcome = "kept"

	// Partial: written in part; the manifest records what failed, and a
	// repair completes it (snapshot.ErrPartial).
	Partial Outcome = "partial"
	// LockHeld: another writer held the date's lock throughout the wait;
	// the date was left alone (snapshot.ErrLockHeld).
	LockHeld Outcome = "lock-held"
	// FencedOut: a newer writer took the date over; its data is intact
	// (snapshot.ErrFencedOut).
	FencedOut Outcome = "fenced-out"
	// NotReady: the date's input is not ready — its upload has not
	// finished, or it changed while it was read; nothing written
	// (model.ErrNotReady).
	NotReady Outcome = "not-ready"
	// Held: the publication gate held the date (snapshot.ErrHeld): its
	// input has fewer districts than are live, changed values, or
	// month-end deltas past their bounds; nothing written. A person looks
	// (snapwriter diff), then allows it or fixes the input.
	Held Outcome = "held"
	// Failed: the date could not be done (input, Firestore, lock store).
	Failed Outcome = "failed"
	// NotStarted: the run stopped (cancelled, or a store did not answer)
	// before it reached the date.
	NotStarted Outcome = "not-started"
)

// Severity ranks an outcome by how much an operator must do about it, so
// that a run reports its worst date: 0 for nothing (Complete, Skipped,
// WouldPrune, Pruned, Gone, Kept), then a repair (Partial), a rerun
// (LockHeld), a look at who else writes (FencedOut), a rerun once the
// upload has finished (NotReady), a person's look at the data (Held), and
// 6 for everything (Failed, NotStarted, and any unknown outcome).
func (o Outcome) Severity() int {
	switch o {
	case Complete, Skipped, WouldPrune, Pruned, Gone, Kept:
		return 0
	case Partial:
		return 1
	case LockHeld:
		return 2
	case FencedOut:
		return 3
	case NotReady:
		return 4
	case Held:
		return 5
	}
	return 6
}

// Done reports whether the date needs nothing more: it is stored whole, or
// pruned as asked (a dry run's WouldPrune is not done).
func (o Outcome) Done() bool { return o.Severity() == 0 && o != WouldPrune }

// Of is the outcome of a date whose write, prune or input read ended
// with err, for the endings the error says (nil: "" — the caller knows
// what success was): the word the table of endings gives its first
// ending (internal/ending), most telling first — a partial write whose
// lease was lost is Partial, a prune refused for the newest complete
// snapshot Kept — and Failed for any other error.
func Of(err error) Outcome {
	if err == nil {
		return ""
	}
	return Outcome(ending.Of(err).Outcome)
}
