package snapshot

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// A transaction left open on the root — as a writer killed mid-chunk leaves
// its chunk's, until Firestore expires it — holds the root. Without the
// contention wait the next writer's root transaction gives up; with it, the
// writer outlasts the stalled transaction, and one WARNING says why.
func TestStalledTransactionIsOutlasted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	mustWrite(t, e.writer(), day, gen(10, 1))
	ref := e.clean.Collection(DefaultCollection).Doc(day)
	held, release := make(chan struct{}), make(chan struct{})
	stalled := make(chan error, 1)
	go func() {
		stalled <- e.clean.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			if _, err := tx.Get(ref); err != nil {
				return err
			}
			close(held)
			<-release
			return errors.New("abandoned") // rolled back
		}, firestore.MaxAttempts(1))
	}()
	<-held
	p := fastPolicy()
	p.MaxRetries = 0
	_, err := e.writer(WithRetryPolicy(p), WithContentionWait(0)).Write(ctx, day, gen(10, 2))
	if !errors.Is(err, ErrRootFailed) || status.Code(err) != codes.Aborted {
		t.Fatalf("without a contention wait: err = %v, want ErrRootFailed with ABORTED", err)
	}

	// With the wait, the writer keeps at it: the stalled transaction is
	// let go only once the writer has met it (its one WARNING), and the
	// write completes after that.
	core, logs := observer.New(zapcore.WarnLevel)
	in := gen(10, 3)
	type result struct {
		res *Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := e.writer(WithRetryPolicy(p), WithContentionWait(45*time.Second), WithLogger(zap.New(core))).Write(ctx, day, in)
		done <- result{res, err}
	}()
	warned := func() bool { return logs.FilterMessageSnippet("root locked by another transaction").Len() > 0 }
	for deadline := time.Now().Add(30 * time.Second); !warned(); {
		select {
		case r := <-done:
			t.Fatalf("the write ended (%v) while a transaction held its root", r.err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no contention warning within 30 s")
		}
	}
	close(release)
	<-stalled
	r := <-done
	if r.err != nil || r.res.Outcome != OutcomeComplete {
		t.Fatalf("with a contention wait: %s, %v", brief(r.res), r.err)
	}
	if n := logs.FilterMessageSnippet("root locked by another transaction").Len(); n != 1 {
		t.Errorf("%d contention warnings, want 1", n)
	}
	if got := e.get(day); !model.Equal(got, in) {
		t.Errorf("read back differs: %s", model.Diff(got, in))
	}
}

// A commit whose outcome is unknown is retried as a fresh transaction, and
// if it still ends unknown, the finish reads the chunk's documents: success
// in the manifest means this writer's document is there, failed that it is
// not.
func TestUnknownCommitOutcomes(t *testing.T) {
	t.Parallel()
	always := func(code codes.Code, msg string) func(*commitCall) error {
		return func(*commitCall) error { return status.Error(code, msg) }
	}
	once := func(code codes.Code, msg string) func(*commitCall) error {
		var n atomic.Int32
		return func(*commitCall) error {
			if n.Add(1) == 1 {
				return status.Error(code, msg)
			}
			return nil
		}
	}
	for _, tc := range []struct {
		name         string
		before       func(*commitCall) error // before the commit reaches the emulator
		after        func(*commitCall) error // after it was applied: the response is lost
		wantComplete bool
	}{
		{name: "response lost once, the client's own retry finds the transaction closed",
			after: once(codes.Unavailable, "connection reset by peer"), wantComplete: true},
		{name: "applied, then transaction invalid or closed",
			after: once(codes.InvalidArgument, "Transaction is invalid or closed"), wantComplete: true},
		{name: "applied, every response lost",
			after: always(codes.DeadlineExceeded, "deadline exceeded"), wantComplete: true},
		{name: "never applied, every outcome unknown",
			before: always(codes.DeadlineExceeded, "deadline exceeded"), wantComplete: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachForm(t, func(t *testing.T, e *env) {
				in := gen(120, 4)
				target := in.Payload.Districts[60].DistrictID // in the second chunk
				only := func(f func(*commitCall) error) func(*commitCall) error {
					if f == nil {
						return nil
					}
					return func(c *commitCall) error {
						if c.has(target) {
							return f(c)
						}
						return nil
					}
				}
				e.f.setRule(only(tc.before))
				e.f.setAfter(only(tc.after))
				res, err := e.writer().Write(context.Background(), day, in)
				checkEnding(t, res, err)
				checkInvariants(t, res)
				if res.Outcome != OutcomeComplete && res.Outcome != OutcomePartial {
					t.Errorf("manifest not recorded: %v", res.Outcome)
				}
				if (res.Outcome == OutcomeComplete) != tc.wantComplete {
					t.Errorf("outcome %v, want complete %v (failed %v)", res.Outcome, tc.wantComplete, res.FailedDistricts)
				}
				if n := e.f.commitsFor(target); tc.before != nil && n < 2 {
					t.Errorf("the chunk was committed %d times; an unknown outcome must be retried", n)
				}
				w, f := checkExact(t, e, day)
				switch {
				case tc.wantComplete && (w != 120 || f != 0):
					t.Errorf("manifest %d/%d, want 120/0", w, f)
				case !tc.wantComplete && (w != 70 || f != 50 || !slices.Contains(res.FailedDistricts, target)):
					t.Errorf("manifest %d/%d, want 70/50 with %s failed", w, f, target)
				}
				if tc.wantComplete {
					if got := e.get(day); !model.Equal(got, in) {
						t.Errorf("read back differs: %s", model.Diff(got, in))
					}
				}
			})
		})
	}
}

// The finish writes the fence document — which every chunk reads, so
// that a chunk commit still landing conflicts with it — only when a
// chunk's commit outcome is unknown: otherwise no chunk of the write can
// be in flight, and a chunk transaction whose inline fence read lost its
// answer (and so cannot be rolled back) would hold the finish up for 60 s.
func TestFinishFencesOnlyUnknownOutcomes(t *testing.T) {
	t.Parallel()
	finishes := func(e *env) (n int, fenced bool) {
		for _, c := range e.f.commits() {
			if c.root && c.state == layout.StateFinished && c.err == nil {
				n++
				fenced = fenced || c.fence
			}
		}
		return n, fenced
	}
	e := newEnv(t)
	mustWrite(t, e.writer(), day, gen(120, 6))
	if n, fenced := finishes(e); n != 1 || fenced {
		t.Errorf("clean write: %d finishes, fence written %v; want 1, false", n, fenced)
	}

	e = newEnv(t)
	in := gen(120, 6)
	target := in.Payload.Districts[60].DistrictID
	e.f.setAfter(func(c *commitCall) error {
		if c.has(target) {
			return status.Error(codes.DeadlineExceeded, "deadline exceeded")
		}
		return nil
	})
	res := mustWrite(t, e.writer(), day, in) // the finish finds the chunk applied
	if n, fenced := finishes(e); n != 1 || !fenced {
		t.Errorf("a chunk of unknown outcome: %d finishes, fence written %v; want 1, true", n, fenced)
	}
	if res.Outcome != OutcomeComplete {
		t.Errorf("write %s; want complete", brief(res))
	}
}

// A finish that cannot be recorded says so: ErrManifestNotRecorded, an
// ERROR log, ManifestRecorded false; Repair then completes the snapshot.
func TestFinishNotRecorded(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		in := gen(80, 5)
		e.refuseFinish()
		core, logs := observer.New(zapcore.ErrorLevel)
		res, err := e.writer(WithLogger(zap.New(core))).Write(context.Background(), day, in)
		if !errors.Is(err, ErrManifestNotRecorded) || errors.Is(err, ErrFencedOut) || errors.Is(err, ErrLockLost) {
			t.Fatalf("err = %v, want ErrManifestNotRecorded alone", err)
		}
		if res == nil || res.Outcome != OutcomeNotRecorded || res.DistrictsWritten != 80 {
			t.Fatalf("result %+v", res)
		}
		if logs.FilterMessageSnippet("manifest was not recorded").Len() != 1 {
			t.Errorf("no ERROR log says the manifest was not recorded: %v", logs.All())
		}
		if md := asMap(e.rootData(day)["metadata"]); md["writeState"] != layout.StateWriting || md["status"] != layout.StatusPartial {
			t.Errorf("root status %v, writeState %v; want it still partial and writing", md["status"], md["writeState"])
		}
		// The recorder recorded what it had before the finish: never more
		// than is stored, and what it had not recorded yet, verify counts.
		w, f := checkExact(t, e, day)
		if w+f != 80 {
			t.Errorf("root without its finish records %d written, %d not; want 80 in all", w, f)
		}
		// Verify, which checks a root of this form at any moment, finds it
		// intact though not finished.
		if rep, err := NewReader(e.clean, "").Verify(context.Background(), day, in); err != nil || !rep.Intact || rep.Complete || rep.NotYetRecorded != f {
			t.Errorf("Verify = %+v, %v; want intact, not complete, %d not yet recorded", rep, err, f)
		}
		e.f.setRule(nil)
		before := len(e.f.commits())
		rres, err := e.writer().Repair(context.Background(), day, in)
		if err != nil || rres.Outcome != OutcomeComplete || rres.DistrictsKept != 80 || rres.DistrictsWritten != 0 {
			t.Fatalf("Repair = %s (kept %d), %v; want complete, the 80 kept", brief(rres), rres.DistrictsKept, err)
		}
		for _, c := range e.f.commits()[before:] {
			if len(c.districts) > 0 {
				t.Errorf("repair rewrote districts %v, stored intact", c.districts)
			}
		}
		if w, f := checkExact(t, e, day); w != 80 || f != 0 {
			t.Errorf("manifest %d/%d after repair", w, f)
		}
	})
}

// Every district document carries the fence of the writer that wrote it.
func TestDistrictDocumentsCarryTheFence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := mustWrite(t, e.writer(), day, gen(30, 6))
	docs, err := e.clean.Collection(DefaultCollection).Doc(day).Collection("districts").Documents(context.Background()).GetAll()
	if err != nil || len(docs) != 30 {
		t.Fatalf("%d documents, %v", len(docs), err)
	}
	for _, d := range docs {
		if f := fenceOf(d.Data()); f != res.Fence {
			t.Errorf("%s: writerFence %q, want %q", d.Ref.ID, f, res.Fence)
		}
	}
}
