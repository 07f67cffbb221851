package outcome

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/snapwriter/snapwriter/internal/ending"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// The endings that need something are ranked, and the rest rank as
// nothing to do; an unknown outcome ranks as Failed.
func TestSeverity(t *testing.T) {
	t.Parallel()
	order := []Outcome{Complete, Partial, LockHeld, FencedOut, NotReady, Held, Failed}
	for i := 1; i < len(order); i++ {
		if order[i].Severity() <= order[i-1].Severity() {
			t.Errorf("%s is not worse than %s", order[i], order[i-1])
		}
	}
	for _, o := range []Outcome{Skipped, WouldPrune, Pruned, Gone, Kept} {
		if o.Severity() != Complete.Severity() {
			t.Errorf("%s ranks %d, want %d as Complete", o, o.Severity(), Complete.Severity())
		}
	}
	if NotStarted.Severity() != Failed.Severity() || Outcome("new").Severity() != Failed.Severity() {
		t.Error("NotStarted and unknown outcomes rank as Failed")
	}
	for o, done := range map[Outcome]bool{Complete: true, Skipped: true, Pruned: true, Gone: true, Kept: true,
		WouldPrune: false, Partial: false, LockHeld: false, FencedOut: false, NotReady: false, Held: false, Failed: false, NotStarted: false} {
		if o.Done() != done {
			t.Errorf("%s: Done %v, want %v", o, o.Done(), done)
		}
	}
}

// Of reads the ending from the error, most telling first.
func TestOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want Outcome
	}{
		{nil, ""},
		{fmt.Errorf("%w: 1 of 2 chunks failed", snapshot.ErrPartial), Partial},
		{fmt.Errorf("%w: %w", snapshot.ErrPartial, snapshot.ErrLockLost), Partial},
		{snapshot.ErrFencedOut, FencedOut},
		{fmt.Errorf("x: %w", snapshot.ErrLockHeld), LockHeld},
		{fmt.Errorf("%w: upload in progress", model.ErrNotReady), NotReady},
		{fmt.Errorf("x: %w", snapshot.ErrHeld), Held},
		{snapshot.ErrManifestNotRecorded, Failed},
		{fmt.Errorf("%w: too big", model.ErrInvalid), Failed},
		{context.DeadlineExceeded, Failed},
		{errors.New("boom"), Failed},
	} {
		if got := Of(tc.err); got != tc.want {
			t.Errorf("Of(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// Of reads the table of endings: every row's word is an outcome of this
// package, and a date that ended so is that outcome.
func TestOfReadsEndings(t *testing.T) {
	t.Parallel()
	known := map[Outcome]bool{Partial: true, LockHeld: true, FencedOut: true, NotReady: true, Held: true, Failed: true, Kept: true}
	for _, e := range ending.All() {
		o := Outcome(e.Outcome)
		if !known[o] {
			t.Errorf("%v: word %q is not an ending's outcome", e.Err, e.Outcome)
		}
		if got := Of(fmt.Errorf("x: %w", e.Err)); got != o {
			t.Errorf("Of(%v) = %q, table %q", e.Err, got, o)
		}
	}
	if Of(snapshot.ErrNewestComplete) != Kept || Outcome(ending.Failure.Outcome) != Failed {
		t.Error("a prune refused for the newest complete snapshot is not kept, or a failure not failed")
	}
}
