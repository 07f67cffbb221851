package ending_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.uber.org/zap/zapcore"

	"github.com/snapwriter/snapwriter/internal/ending"
	"github.com/snapwriter/snapwriter/loadtest"
	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// Every row is reached by an error of its own, wrapped, and no sentinel
// has two rows.
func TestEveryRowReachable(t *testing.T) {
	t.Parallel()
	seen := map[error]bool{}
	for i, e := range ending.All() {
		if e.Err == nil || seen[e.Err] {
			t.Errorf("row %d: sentinel %v nil or twice", i, e.Err)
		}
		seen[e.Err] = true
		if got := ending.Of(fmt.Errorf("snapshot d: %w: cause", e.Err)); got != e {
			t.Errorf("row %d (%v): Of gives the row of %v", i, e.Err, got.Err)
		}
	}
	if ending.Of(nil) != ending.None || ending.Of(errors.New("boom")) != ending.Failure ||
		ending.Of(context.Canceled) != ending.Failure {
		t.Error("nil is not None, or an error of no row is not Failure")
	}
}

// The sentinels the libraries name are the table's, values and words
// alike: the public names are the table's rows.
func TestSentinelsAreTheTables(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		snapshot.ErrPartial, snapshot.ErrLockHeld, snapshot.ErrFencedOut, snapshot.ErrLockLost,
		snapshot.ErrManifestNotRecorded, snapshot.ErrLockBackendSwitch, snapshot.ErrLockKeySwitch,
		snapshot.ErrRootFailed, snapshot.ErrTimeout, snapshot.ErrNothingWritten, snapshot.ErrMismatch,
		snapshot.ErrNotFound, snapshot.ErrNoDistrict, snapshot.ErrNewestComplete,
		model.ErrNotReady, model.ErrInvalid, loadtest.ErrRefused, loadtest.ErrBusy, loadtest.ErrPartialRounds,
		locking.ErrAcquisitionTimeout, locking.ErrContended,
	} {
		if ending.Of(err).Err != err {
			t.Errorf("%v has no row of its own", err)
		}
	}
}

// An error that matches two rows ends as the documented one, whichever
// it wraps outermost: the combinations the libraries make (DESIGN.md §5,
// the README's exit codes, snapshot's sentinels' doc).
func TestOrderOfCombinations(t *testing.T) {
	t.Parallel()
	changed := &snapshot.ChangedError{Changed: []string{"district 7"}}
	cases := []struct {
		name string
		a, b error
		want error
	}{
		// An input waited for in vain is not ready (7), not invalid (2).
		{"waited in vain", model.ErrNotReady, model.ErrInvalid, model.ErrNotReady},
		// A refusal for changed data is the mismatch --rewrite-changed lifts.
		{"changed", snapshot.ErrMismatch, changed, ending.ErrChanged},
		// A lease lost mid-write: partial (3), the manifest records it.
		{"partial, lock lost", snapshot.ErrPartial, snapshot.ErrLockLost, snapshot.ErrPartial},
		// A manifest not recorded, with the lease lost: not recorded (1).
		{"not recorded, lock lost", snapshot.ErrManifestNotRecorded, snapshot.ErrLockLost, snapshot.ErrManifestNotRecorded},
		{"root failed, lock lost", snapshot.ErrRootFailed, snapshot.ErrLockLost, snapshot.ErrRootFailed},
		{"backend switch, lock lost", snapshot.ErrLockBackendSwitch, snapshot.ErrLockLost, snapshot.ErrLockBackendSwitch},
		{"key switch, lock lost", snapshot.ErrLockKeySwitch, snapshot.ErrLockLost, snapshot.ErrLockKeySwitch},
		{"legacy lock held, lock lost", snapshot.ErrLockHeld, snapshot.ErrLockLost, snapshot.ErrLockHeld},
		{"mismatch, lock lost", snapshot.ErrMismatch, snapshot.ErrLockLost, snapshot.ErrMismatch},
		{"fenced out, lock lost", snapshot.ErrFencedOut, snapshot.ErrLockLost, snapshot.ErrFencedOut},
		{"not found, lock lost", snapshot.ErrNotFound, snapshot.ErrLockLost, snapshot.ErrLockLost},
		// A lease lost before the root: lost (1), and nothing written.
		{"lost before the root", snapshot.ErrLockLost, snapshot.ErrNothingWritten, snapshot.ErrLockLost},
		// A fenced-out write is not partial (ErrPartial's doc; exit 5).
		{"fenced out, partial", snapshot.ErrFencedOut, snapshot.ErrPartial, snapshot.ErrFencedOut},
		{"loadtest busy", loadtest.ErrBusy, locking.ErrAcquisitionTimeout, loadtest.ErrBusy},
		{"lock wait over", snapshot.ErrTimeout, locking.ErrAcquisitionTimeout, snapshot.ErrTimeout},
		{"contended", snapshot.ErrTimeout, locking.ErrContended, snapshot.ErrTimeout},
	}
	for _, tc := range cases {
		for _, err := range []error{fmt.Errorf("%w: %w", tc.a, tc.b), fmt.Errorf("%w (%w)", tc.b, tc.a)} {
			if got := ending.Of(err).Err; got != tc.want {
				t.Errorf("%s: %q ends as %v, want %v", tc.name, err, got, tc.want)
			}
		}
	}
	// A snapshot not found has no error.type of its own: the lost lock's.
	if got := ending.Name(fmt.Errorf("%w (%w)", snapshot.ErrNotFound, snapshot.ErrLockLost)); got != "LockLost" {
		t.Errorf("not found, lock lost: error.type %q, want LockLost", got)
	}
}

// Rows that share an exit code share the closing line's level; rows that
// share a date's outcome (other than failed, which takes its code from
// the error) share an exit code; and a name is missing only where the
// telemetry names the cause.
func TestConsistent(t *testing.T) {
	t.Parallel()
	levels := map[int]zapcore.Level{ending.None.Exit: ending.None.Level, ending.Failure.Exit: ending.Failure.Level}
	exits := map[string]int{}
	for _, e := range ending.All() {
		if l, ok := levels[e.Exit]; ok && l != e.Level {
			t.Errorf("%v: exit %d at %s, another at %s", e.Err, e.Exit, e.Level, l)
		}
		levels[e.Exit] = e.Level
		if x, ok := exits[e.Outcome]; ok && x != e.Exit && e.Outcome != ending.Failure.Outcome {
			t.Errorf("%v: outcome %s exits %d, another %d", e.Err, e.Outcome, e.Exit, x)
		}
		exits[e.Outcome] = e.Exit
		if e.Outcome == "" {
			t.Errorf("%v: no outcome word", e.Err)
		}
		unnamed := e.Err == snapshot.ErrNotFound || e.Err == snapshot.ErrNoDistrict || e.Err == snapshot.ErrNewestComplete
		if (e.Name == "") != unnamed {
			t.Errorf("%v: name %q", e.Err, e.Name)
		}
		if ending.ForExit(e.Exit).Level != e.Level {
			t.Errorf("%v: ForExit(%d) has another level", e.Err, e.Exit)
		}
		if f, ok := ending.ForOutcome(e.Outcome); !ok || (f.Exit != e.Exit && e.Outcome != ending.Failure.Outcome) {
			t.Errorf("%v: ForOutcome(%s) = %v, %v", e.Err, e.Outcome, f, ok)
		}
	}
	if ending.ForExit(ending.ExitOK) != ending.None || ending.ForExit(99).Level != ending.Failure.Level {
		t.Error("ForExit: 0 is not None, or an unknown code not a failure's level")
	}
}
