package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/snapshot"
)

// The CLI adds what to run or pass to the library's messages by the
// sentinel they match, once,
// and what the error matches stays as it was.
func TestHint(t *testing.T) {
	t.Parallel()
	lost := fmt.Errorf("%w: %w", snapshot.ErrLockLost, locking.ErrLeaseLost)
	changed := &snapshot.ChangedError{Changed: []string{"7"}}
	cases := []struct {
		err  error
		want string // in the message after withHint; "" for no hint
	}{
		{fmt.Errorf("snapshot d: %w: 2 of 3 chunks failed", snapshot.ErrPartial), "— `snapwriter repair` completes it"},
		{fmt.Errorf("snapshot d: %w: %w", snapshot.ErrPartial, lost), "— `snapwriter repair` completes it"},
		{fmt.Errorf("snapshot d: %w: x (and %w)", snapshot.ErrManifestNotRecorded, lost), "— `snapwriter repair` (or writing it again) completes it"},
		{&waitError{Endpoint: "s", Err: fmt.Errorf("snapshot d: %w: x", snapshot.ErrManifestNotRecorded)}, "`snapwriter repair` (or writing it again)"},
		{fmt.Errorf("snapshot d: %w: x", snapshot.ErrLockBackendSwitch), "then rerun once with --allow-lock-backend-switch"},
		{fmt.Errorf("snapshot d: %w: x", snapshot.ErrLockKeySwitch), "then rerun once with --allow-lock-backend-switch"},
		{fmt.Errorf("snapshot d: %w: %w", snapshot.ErrMismatch, changed), "or `snapwriter repair --rewrite-changed` re-writes what differs"},
		{fmt.Errorf("snapshot d: %w: other districts", snapshot.ErrMismatch), ""},
		{fmt.Errorf("snapshot d: %w", snapshot.ErrFencedOut), ""},
		{fmt.Errorf("snapshot d: %w (%w)", snapshot.ErrFencedOut, lost), ""},
		{fmt.Errorf("snapshot d: %w: %w", snapshot.ErrLockLost, snapshot.ErrNothingWritten), ""},
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
