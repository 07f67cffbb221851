package main

import (
	"context"
	"errors"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// hint is what the user can run or pass about err, by the snapshot
// sentinel it matches: the library's messages say what happened, the CLI
// what to do about it. "" when there is nothing to add.
func hint(err error) string {
	switch {
	case errors.Is(err, snapshot.ErrPartial):
		return "`snapwriter repair` completes it"
	case errors.Is(err, snapshot.ErrManifestNotRecorded):
		return "`snapwriter repair` (or writing it again) completes it"
	case errors.Is(err, snapshot.ErrLockBackendSwitch):
		return "stop every writer of the other lock backend, then rerun once with --allow-lock-backend-switch"
	case errors.Is(err, snapshot.ErrLockKeySwitch):
		return "stop every other writer of this snapshot, then rerun once with --allow-lock-backend-switch"
	case errors.Is(err, snapshot.ErrMismatch):
		// Only a refusal for changed data (not for other districts) is
		// lifted by --rewrite-changed.
		if errors.As(err, new(*snapshot.ChangedError)) {
			return "or `snapwriter repair --rewrite-changed` re-writes what differs"
		}
	}
	return ""
}

// hinted is an error whose message ends with its hint.
type hinted struct{ err error }

func (h hinted) Error() string { return h.err.Error() + " — " + hint(h.err) }
func (h hinted) Unwrap() error { return h.err }

// withHint is err with its hint appended to its message, if it has one
// and has not got it yet; what it matches (errors.Is, errors.As) is err's.
func withHint(err error) error {
	if err == nil || hint(err) == "" || errors.As(err, new(hinted)) {
		return err
	}
	return hinted{err}
}

// hintingWriter is a Writer whose errors carry their hint, for the dates
// a backfill reports.
type hintingWriter struct{ w *snapshot.Writer }

func (h hintingWriter) Write(ctx context.Context, id string, snap *model.Snapshot) (*snapshot.Result, error) {
	res, err := h.w.Write(ctx, id, snap)
	return res, withHint(err)
}
