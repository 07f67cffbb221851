package snapshot

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/locking"
)

// Issue 25: a lease lost before the root document was written ends the
// write with its own error — ErrLockLost, not ErrRootFailed, and
// ErrNothingWritten unless the root's commit was in flight — and writes
// nothing: no root, no district. The root's commit is held until the
// loss (the lock document deleted under the writer) ends it: refused
// (FAILED_PRECONDITION, certainly not applied; not ABORTED, which the
// client retries after a pause that the ended context cuts short, leaving
// the outcome unknown), or cut off (outcome unknown).
func TestLeaseLostBeforeRoot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		ending  func(ctx context.Context) error
		nothing bool
		says    string
	}{
		{"refused", func(context.Context) error {
			return status.Error(codes.FailedPrecondition, "injected: refused as the lease ended")
		}, true,
			"lost the lock before the root document was written: nothing was written — the stored snapshot is as it was; rerun the write"},
		{"cut off", func(ctx context.Context) error { return ctx.Err() }, false,
			"lost the lock while the root document's commit was in flight: it may have been written"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			atRoot := make(chan struct{})
			e.f.setRule(func(c *commitCall) error {
				if !c.rootSet {
					return nil
				}
				close(atRoot)
				<-c.ctx.Done() // the write's work context: ends with the lease
				return tc.ending(c.ctx)
			})
			w := e.writer(WithLockTTL(3 * time.Second))
			done := make(chan error, 1)
			var res *Result
			go func() {
				var err error
				res, err = w.Write(context.Background(), day, gen(120, 4))
				done <- err
			}()
			<-atRoot
			if _, err := e.clean.Collection("locks").Doc(e.lockKey(day)).Delete(context.Background()); err != nil {
				t.Fatal(err)
			}
			err := <-done
			if !errors.Is(err, ErrLockLost) || !errors.Is(err, locking.ErrLeaseLost) || errors.Is(err, ErrRootFailed) ||
				errors.Is(err, ErrPartial) || errors.Is(err, ErrNothingWritten) != tc.nothing {
				t.Errorf("err = %v; want ErrLockLost, ErrNothingWritten %v, not ErrRootFailed nor ErrPartial", err, tc.nothing)
			}
			if err != nil && (!strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), ErrRootFailed.Error())) {
				t.Errorf("err says %q; want %q, and not %q", err, tc.says, ErrRootFailed)
			}
			if res == nil || res.DistrictsWritten != 0 || len(res.BatchResults) != 1 || res.Outcome != OutcomeNotWritten {
				t.Errorf("result %s; want the root's failure alone", brief(res))
			}
			if n := len(e.stored(day)); n != 0 {
				t.Errorf("%d district documents stored", n)
			}
			if snap, err := e.clean.Collection(DefaultCollection).Doc(day).Get(context.Background()); err == nil || snap.Exists() {
				t.Errorf("a root document was written: %v", err)
			}
		})
	}
}
