package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/snapshot"
)

// The CLI adds what to run or pass to the library's messages by kind, once,
// and what the error matches stays as it was.
func TestHint(t *testing.T) {
	t.Parallel()
	lost := fmt.Errorf("%w: %w", snapshot.ErrLockLost, locking.ErrLeaseLost)
	cases := []struct {
		err  error
		want string // in the message after withHint; "" for no hint
	}{
		{&snapshot.Error{ID: "d", Err: fmt.Errorf("%w: %w", snapshot.ErrPartial, errors.New("2 of 3 chunks failed"))}, "— `snapwriter repair` completes it"},
		{&snapshot.Error{ID: "d", Err: fmt.Errorf("%w: %w", snapshot.ErrPartial, lost)}, "— `snapwriter repair` completes it"},
		{&snapshot.Error{ID: "d", Err: fmt.Errorf("%w: %w", snapshot.ErrManifestNotRecorded, fmt.Errorf("x (and %w)", lost))}, "— `snapwriter repair` (or writing it again) completes it"},
		{&waitError{Endpoint: "s", Err: &snapshot.Error{ID: "d", Err: fmt.Errorf("%w: %w", snapshot.ErrManifestNotRecorded, errors.New("x"))}}, "`snapwriter repair` (or writing it again)"},
		{&snapshot.Error{ID: "d", Err: fmt.Errorf("%w: %w", snapshot.ErrLockBackendSwitch, errors.New("x"))}, "then rerun once with --allow-lock-backend-switch"},
		{&snapshot.Error{ID: "d", Err: fmt.Errorf("%w: %w", snapshot.ErrLockKeySwitch, errors.New("x"))}, "then rerun once with --allow-lock-backend-switch"},
		{&snapshot.Error{ID: "d", Err: snapshot.ErrFencedOut}, ""},
		{errors.New("other"), ""},
	}
	for _, tc := range cases {
		got := withHint(tc.err)
		msg := got.Error()
		if tc.want == "" {
			if got != tc.err {
				t.Errorf("%v: hinted as %q", tc.err, msg)
			}
			continue
		}
		if !strings.HasPrefix(msg, tc.err.Error()) || !strings.HasSuffix(msg, hint(tc.err)) || !strings.Contains(msg, tc.want) {
			t.Errorf("%q: want %q after the message", msg, tc.want)
		}
		if withHint(got).Error() != msg || !errors.Is(got, tc.err) || exitCode(got) != exitCode(tc.err) {
			t.Errorf("%q: hinted twice, or matches other than it did", msg)
		}
	}
}
