package snapshot

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/snapwriter/snapwriter/locking"
)

// Every sentinel is an *Error of its own kind: errors.Is matches an error
// of that kind whatever its snapshot and cause, and no other kind.
func TestErrorKinds(t *testing.T) {
	t.Parallel()
	sentinels := map[Kind]error{
		Partial: ErrPartial, LockHeld: ErrLockHeld, FencedOut: ErrFencedOut, LockLost: ErrLockLost,
		ManifestNotRecorded: ErrManifestNotRecorded, LockBackendSwitch: ErrLockBackendSwitch, LockKeySwitch: ErrLockKeySwitch,
		RootFailed: ErrRootFailed, Timeout: ErrTimeout, NothingWritten: ErrNothingWritten, Mismatch: ErrMismatch,
	}
	for k, s := range sentinels {
		err := &Error{Kind: k, ID: "2026-11-20", Err: errors.New("cause")}
		for k2, s2 := range sentinels {
			if got := errors.Is(err, s2); got != (k == k2) {
				t.Errorf("errors.Is(%v error, %v sentinel) = %v", k, k2, got)
			}
		}
		if s.Error() != kindTexts[k] || k.String() == "" || kindNames[k] != k.String() {
			t.Errorf("%v: sentinel says %q, name %q", k, s.Error(), k.String())
		}
	}
	if got := Kind(99).String(); got != "Kind(99)" {
		t.Errorf("unknown kind: %q", got)
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
			&Error{Kind: Partial, ID: "d", Err: &Error{Kind: LockLost, Err: fmt.Errorf("%w; the manifest records what was written", lost)}},
			[]error{ErrPartial, ErrLockLost, locking.ErrLeaseLost}, []error{ErrManifestNotRecorded},
			"snapshot d: snapshot written partially: lost the lock: renewing: locking: lease lost; the manifest records what was written"},
		{"manifest not recorded, lock lost",
			&Error{Kind: ManifestNotRecorded, ID: "d", Err: fmt.Errorf("%w; the root still says the write is in progress (and %w)",
				context.DeadlineExceeded, &Error{Kind: LockLost, Err: lost})},
			[]error{ErrManifestNotRecorded, ErrLockLost, locking.ErrLeaseLost, context.DeadlineExceeded}, []error{ErrPartial},
			"snapshot d: the manifest was not recorded: context deadline exceeded; the root still says the write is in progress (and lost the lock: renewing: locking: lease lost)"},
		{"lost before the root",
			&Error{Kind: LockLost, ID: "d", Err: fmt.Errorf("%w before the root document was written: %w (%w)", ErrLockLost, ErrNothingWritten, lost)},
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
	if !errors.As(withID("d", fmt.Errorf("x: %w", ErrFencedOut)), &e) || e.Kind != FencedOut || e.ID != "d" {
		t.Errorf("withID: %+v", e)
	}
}
