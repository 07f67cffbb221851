package snapshot

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/snapwriter/snapwriter/internal/ending"
	"github.com/snapwriter/snapwriter/locking"
)

// Every sentinel is matched by an error of its own, whatever its snapshot
// and cause, and by no other's; each says its ending as messages have
// always said it, and has its name.
func TestErrorKinds(t *testing.T) {
	t.Parallel()
	texts := map[error]string{
		ErrPartial: "snapshot written partially", ErrLockHeld: "snapshot lock is held by another writer",
		ErrFencedOut: "fenced out by a newer writer", ErrLockLost: "lost the lock",
		ErrManifestNotRecorded: "the manifest was not recorded", ErrLockBackendSwitch: "snapshot was written under a different lock backend",
		ErrLockKeySwitch: "snapshot was written under a different lock key", ErrRootFailed: "root document write failed",
		ErrTimeout: "no answer from the lock store", ErrNothingWritten: "nothing was written",
		ErrMismatch: "input does not match the stored snapshot", ErrHeld: "held by the publication gate",
	}
	if len(sentinels) != len(texts) {
		t.Fatalf("%d sentinels named, want %d", len(sentinels), len(texts))
	}
	for _, s := range sentinels {
		err := newError("2026-11-20", s, errors.New("cause"))
		name := ending.Of(s).Name
		for _, s2 := range sentinels {
			if got := errors.Is(err, s2); got != (s == s2) {
				t.Errorf("errors.Is(%s error, %s sentinel) = %v", name, ending.Of(s2).Name, got)
			}
		}
		if s.Error() != texts[s] || name == "" || errorType(err) != name {
			t.Errorf("%s: sentinel says %q, error.type %q", name, s.Error(), errorType(err))
		}
		if want := "snapshot 2026-11-20: " + texts[s] + ": cause"; err.Error() != want {
			t.Errorf("%s: message %q, want %q", name, err, want)
		}
	}
}

// The combined endings match every kind they are, and keep their causes
// reachable, the lock's among them; messages say each kind once.
func TestErrorCombinations(t *testing.T) {
	t.Parallel()
	lost := fmt.Errorf("renewing: %w", locking.ErrLeaseLost)
	cases := []struct {
		name string
		err  error
		is   []error
		not  []error
		msg  string
	}{
		{"partial, lock lost",
			newError("d", ErrPartial, fmt.Errorf("%w: %w; the manifest records what was written", ErrLockLost, lost)),
			[]error{ErrPartial, ErrLockLost, locking.ErrLeaseLost}, []error{ErrManifestNotRecorded},
			"snapshot d: snapshot written partially: lost the lock: renewing: locking: lease lost; the manifest records what was written"},
		{"manifest not recorded, lock lost",
			newError("d", ErrManifestNotRecorded, fmt.Errorf("%w; the root still says the write is in progress (and %w)",
				context.DeadlineExceeded, fmt.Errorf("%w: %w", ErrLockLost, lost))),
			[]error{ErrManifestNotRecorded, ErrLockLost, locking.ErrLeaseLost, context.DeadlineExceeded}, []error{ErrPartial},
			"snapshot d: the manifest was not recorded: context deadline exceeded; the root still says the write is in progress (and lost the lock: renewing: locking: lease lost)"},
		{"lost before the root",
			newError("d", ErrLockLost, fmt.Errorf("%w before the root document was written: %w (%w)", ErrLockLost, ErrNothingWritten, lost)),
			[]error{ErrLockLost, ErrNothingWritten, locking.ErrLeaseLost}, []error{ErrRootFailed},
			"snapshot d: lost the lock before the root document was written: nothing was written (renewing: locking: lease lost)"},
		{"refused, with the id",
			withID("d", fmt.Errorf("after 1 attempt: %w", fmt.Errorf("%w: stored by a %q-locked writer", ErrLockBackendSwitch, "postgres"))),
			[]error{ErrLockBackendSwitch}, []error{ErrRootFailed},
			`snapshot d: after 1 attempt: snapshot was written under a different lock backend: stored by a "postgres"-locked writer`},
		{"no kind", withID("d", locking.ErrServiceUnavailable), []error{locking.ErrServiceUnavailable}, []error{ErrTimeout},
			"snapshot d: locking: ServiceUnavailable"},
	}
	for _, tc := range cases {
		for _, target := range tc.is {
			if !errors.Is(tc.err, target) {
				t.Errorf("%s: does not match %v", tc.name, target)
			}
		}
		for _, target := range tc.not {
			if errors.Is(tc.err, target) {
				t.Errorf("%s: matches %v", tc.name, target)
			}
		}
		if tc.err.Error() != tc.msg {
			t.Errorf("%s: message\n%s\nwant\n%s", tc.name, tc.err, tc.msg)
		}
	}
	var e *Error
	if err := withID("d", fmt.Errorf("x: %w", ErrFencedOut)); !errors.As(err, &e) || !errors.Is(e, ErrFencedOut) || e.ID != "d" {
		t.Errorf("withID: %+v", e)
	}
}

// The telemetry's error.type is the table of endings' name, for every row
// that has one; the rest are named by their cause.
func TestTelemetryErrorTypeFromEndings(t *testing.T) {
	t.Parallel()
	for _, e := range ending.All() {
		err := withID("d", fmt.Errorf("x: %w", e.Err))
		want := e.Name
		if want == "" {
			want = "_OTHER"
		}
		if got := errorType(err); got != want {
			t.Errorf("%v: error.type %q, table %q", e.Err, got, want)
		}
	}
	lostNotFound := fmt.Errorf("%w (%w)", ErrNotFound, fmt.Errorf("%w: %w", ErrLockLost, locking.ErrLeaseLost))
	for err, want := range map[error]string{
		context.Canceled: "Canceled", fmt.Errorf("x: %w", context.DeadlineExceeded): "DEADLINE_EXCEEDED",
		lostNotFound: "LockLost", errors.New("boom"): "_OTHER",
	} {
		if got := errorType(err); got != want {
			t.Errorf("%v: error.type %q, want %q", err, got, want)
		}
	}
}
