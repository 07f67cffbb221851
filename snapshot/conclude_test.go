package snapshot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/locking"
)

// grantingBackend grants every lock at once and extends it until lose is
// set: a lock backend without a server, for a lease the test can lose.
type grantingBackend struct{ lose atomic.Bool }

func (b *grantingBackend) Acquire(_ context.Context, _ string, ttl time.Duration) (locking.AcquireResult, error) {
	return locking.AcquireResult{OK: true, LockID: "lock-1", ExpiresAt: time.Now().Add(ttl), Fence: "000000000000001"}, nil
}

func (b *grantingBackend) Release(context.Context, string) (bool, error) { return true, nil }

func (b *grantingBackend) Extend(_ context.Context, _ string, ttl time.Duration) (locking.ExtendResult, error) {
	if b.lose.Load() {
		return locking.ExtendResult{}, nil
	}
	return locking.ExtendResult{OK: true, ExpiresAt: time.Now().Add(ttl)}, nil
}

func (b *grantingBackend) IsLocked(context.Context, string) (bool, error) { return true, nil }

func (b *grantingBackend) LookupKey(context.Context, string) (*locking.LockInfo, error) {
	return nil, nil
}

func (b *grantingBackend) LookupLockID(context.Context, string) (*locking.LockInfo, error) {
	return nil, nil
}

func (b *grantingBackend) Capabilities() locking.Capabilities {
	return locking.Capabilities{Backend: "granting", SupportsFencing: true, TimeAuthority: "client"}
}

// leased gives j a lease on a granting backend, lost at once when lost.
func leased(t *testing.T, j *offlineRun, lost bool) {
	t.Helper()
	b := &grantingBackend{}
	l, err := locking.Acquire(context.Background(), b, "snapshot-"+day, locking.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	if lost {
		b.lose.Store(true)
		if err := l.Renew(context.Background()); !errors.Is(err, locking.ErrLeaseLost) {
			t.Fatalf("Renew of a lease the backend refuses: %v, want ErrLeaseLost", err)
		}
	}
	j.lease = l
}

// How a write that reached its chunks ends, most telling first: fenced
// out; the manifest not recorded (the lock's loss noted); partial because
// the lock was lost, the write stopped or chunks failed; else complete,
// even after the lock was lost.
func TestConclude(t *testing.T) {
	t.Parallel()
	w := offlineWriter(t)
	refused := errors.New("refused")
	partial := func(r *Result) {
		r.Outcome = OutcomePartial
		r.BatchResults = append(r.BatchResults, BatchResult{BatchIndex: 1, Success: true, DistrictIDs: []string{"1"}},
			BatchResult{BatchIndex: 2, Err: refused, DistrictIDs: []string{"2"}})
		r.Chunks, r.FailedChunks, r.FailedDistricts = 2, 1, []string{"2"}
	}
	complete := func(r *Result) { r.Outcome = OutcomeComplete }
	for _, tc := range []struct {
		name      string
		result    func(*Result)
		finishErr error
		fenced    bool
		lost      bool
		stopped   bool
		want      []error // nil: no error
		text      string
		lostNoted bool // Result.LockRenewals.Lost
	}{
		{name: "complete", result: complete},
		{name: "complete, then the lock lost", result: complete, lost: true, lostNoted: true},
		{name: "finish fenced out", result: partial, finishErr: fmt.Errorf("finish: %w", ErrFencedOut), lost: true,
			want: []error{ErrFencedOut}},
		{name: "a chunk fenced out", result: partial, fenced: true, lost: true, want: []error{ErrFencedOut}},
		{name: "manifest not recorded", result: partial, finishErr: errors.New("deadline"),
			want: []error{ErrManifestNotRecorded}, text: "deadline; the root still says the write is in progress"},
		{name: "manifest not recorded, lock lost", result: partial, finishErr: errors.New("deadline"), lost: true,
			want: []error{ErrManifestNotRecorded, ErrLockLost, locking.ErrLeaseLost}, lostNoted: true},
		{name: "partial, lock lost", result: partial, lost: true, stopped: true,
			want: []error{ErrPartial, ErrLockLost}, text: "the manifest records what was written", lostNoted: true},
		{name: "partial, stopped", result: partial, stopped: true,
			want: []error{ErrPartial, context.Canceled}, text: "stopped before every chunk was written"},
		{name: "partial", result: partial,
			want: []error{ErrPartial}, text: "1 of 2 chunks failed, 1 district not written (the first, chunk 2: refused)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := offlineJob(t, w, 2)
			tc.result(j.res)
			leased(t, j, tc.lost)
			if tc.stopped {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				j.ctx = ctx
			}
			err := j.conclude(j.res, tc.finishErr, tc.fenced)
			if tc.want == nil && err != nil {
				t.Errorf("err %v, want nil", err)
			}
			for _, want := range tc.want {
				if !errors.Is(err, want) {
					t.Errorf("err %v does not match %v", err, want)
				}
			}
			var e *Error
			if tc.want != nil && (!errors.As(err, &e) || e.ID != day) {
				t.Errorf("err %v is not an *Error of snapshot %s", err, day)
			}
			if tc.text != "" && (err == nil || !strings.Contains(err.Error(), tc.text)) {
				t.Errorf("err %v does not say %q", err, tc.text)
			}
			if j.res.LockRenewals.Lost != tc.lostNoted {
				t.Errorf("LockRenewals.Lost = %v, want %v", j.res.LockRenewals.Lost, tc.lostNoted)
			}
		})
	}
}
