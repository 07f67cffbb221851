package main

import (
	"context"
	"errors"

	"github.com/snapwriter/snapwriter/internal/ending"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// hint is what the user can run or pass about err, as the table of
// endings gives it for err's ending: the library's messages say what
// happened, the CLI what to do about it. "" when there is nothing to add.
//
// An error can match several sentinels; the ending the write came to
// decides (the table's order). A partial write or an unrecorded manifest
// may also carry the lost lock (ErrLockLost), and only a refusal for
// changed data (a ChangedError, not one for other districts) is lifted by
// --rewrite-changed. A fenced-out write has nothing to run: its newer
// writer's data stands.
func hint(err error) string { return ending.Of(err).Hint }

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
