package snapshot

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	vkit "cloud.google.com/go/firestore/apiv1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/retry"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

var emu *emulator.Emulator

func TestMain(m *testing.M) { os.Exit(emulator.Main(m, &emu)) }

const day = "2026-11-20"

// fastPolicy is the default policy with millisecond backoffs, so retry tests
// exercise the real retry path without sleeping for seconds.
func fastPolicy() retry.Policy {
	p := retry.DefaultPolicy()
	p.Initial, p.Max = 5*time.Millisecond, 40*time.Millisecond
	p.AttemptTimeout, p.TotalTimeout = 20*time.Second, time.Minute
	return p
}

type env struct {
	t       *testing.T
	project string
	f       *faults
	client  *firestore.Client // through the fault injector
	api     *vkit.Client      // the chunks' API client, through the fault injector too
	clean   *firestore.Client // straight to the emulator, for checks
	// paged: the env's writers keep every manifest in pages of
	// testPageSize entries (see eachForm).
	paged bool
}

// testPageSize is the manifest page size of a paged env: small, so that a
// chunk of 50 districts spans several pages.
const testPageSize = 7

// eachForm runs test twice, in parallel subtests: on the inline manifest
// and on the paged one.
func eachForm(t *testing.T, test func(t *testing.T, e *env)) {
	t.Helper()
	for _, paged := range []bool{false, true} {
		name := "inline"
		if paged {
			name = "paged"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.paged = paged
			test(t, e)
		})
	}
}

func newEnv(t *testing.T) *env {
	t.Helper()
	project := emulator.ProjectID(t)
	f := &faults{}
	return &env{t: t, project: project, f: f,
		client: emu.TestClientFor(t, project, f.interceptor()),
		api:    emu.TestAPIClient(t, f.interceptor()),
		clean:  emu.TestClientFor(t, project)}
}

func (e *env) locker() *firestorelock.Backend {
	e.t.Helper()
	b, err := firestorelock.New(e.clean)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *env) writer(opts ...Option) *Writer {
	e.t.Helper()
	base := []Option{WithAPIClient(e.api), WithRetryPolicy(fastPolicy()), WithLockWait(0)}
	if e.paged {
		base = append(base, withPages(0, testPageSize))
	}
	w, err := NewWriter(e.client, e.locker(), append(base, opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	return w
}

// stored lists the district ids stored under snapshot id.
func (e *env) stored(id string) []string {
	e.t.Helper()
	docs, err := e.clean.Collection(DefaultCollection).Doc(id).Collection("districts").Documents(context.Background()).GetAll()
	if err != nil {
		e.t.Fatal(err)
	}
	ids := make([]string, 0, len(docs))
	for _, d := range docs {
		ids = append(ids, strings.TrimPrefix(d.Ref.ID, "district_"))
	}
	sort.Strings(ids)
	return ids
}

// rootData is snapshot id's root with its manifest whole, its pages'
// entries in manifest.districts when paged. The pages must agree with the
// root, and the root's form with the env's.
func (e *env) rootData(id string) map[string]any {
	e.t.Helper()
	ref := e.clean.Collection(DefaultCollection).Doc(id)
	doc, err := ref.Get(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	pages, err := ref.Collection(layout.PagesCollection).Documents(context.Background()).GetAll()
	if err != nil {
		e.t.Fatal(err)
	}
	root := doc.Data()
	if probs := pageProblems(id, root, pages); len(probs) > 0 {
		e.t.Errorf("manifest pages: %v", probs)
	}
	if pagedRoot(root) != e.paged {
		e.t.Errorf("manifest paged %v, want %v", pagedRoot(root), e.paged)
	}
	expandPages(root, pages)
	return root
}

func (e *env) get(id string) *model.Snapshot {
	e.t.Helper()
	s, err := NewReader(e.clean, "").Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func gen(n int, seed int64) *model.Snapshot { return model.Generate(day, n, seed) }

func sortedIDs(s *model.Snapshot) []string {
	ids := layout.DistrictIDs(s)
	sort.Strings(ids)
	return ids
}

func mustWrite(t *testing.T, w *Writer, id string, s *model.Snapshot) *Result {
	t.Helper()
	res, err := w.Write(context.Background(), id, s)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if res.Outcome != OutcomeComplete && res.Outcome != OutcomeSkipped {
		t.Fatalf("Write incomplete: %+v", res)
	}
	return res
}

// mustPartial asserts that a write or repair ended partial, the one way
// the package says so: a Result whose Outcome is OutcomePartial (the
// manifest recorded), beside an error matching ErrPartial and no other
// ending.
func mustPartial(t *testing.T) func(*Result, error) *Result {
	return func(res *Result, err error) *Result {
		t.Helper()
		return checkPartial(t, res, err)
	}
}

func checkPartial(t *testing.T, res *Result, err error) *Result {
	t.Helper()
	if !errors.Is(err, ErrPartial) || errors.Is(err, ErrFencedOut) || errors.Is(err, ErrManifestNotRecorded) || errors.Is(err, ErrRootFailed) {
		t.Fatalf("err = %v, want ErrPartial alone", err)
	}
	if res == nil || res.Outcome != OutcomePartial || len(res.FailedDistricts) == 0 {
		t.Fatalf("want a partial result with its manifest recorded, got %s", brief(res))
	}
	return res
}

// checkEnding asserts the contract between a Result and its error: nil
// exactly when complete (or skipped), ErrPartial when a recorded write is
// incomplete, and no other outcome.
func checkEnding(t *testing.T, res *Result, err error) {
	t.Helper()
	switch {
	case res == nil:
		t.Fatalf("no result (err %v)", err)
	case res.Outcome == OutcomeComplete || res.Outcome == OutcomeSkipped:
		if err != nil {
			t.Fatalf("result %s with err %v", brief(res), err)
		}
	case res.Outcome != OutcomePartial || !errors.Is(err, ErrPartial):
		t.Fatalf("result %s with err %v", brief(res), err)
	}
}

// brief is a Result without its batch results, for failure messages.
func brief(res *Result) string {
	if res == nil {
		return "<nil>"
	}
	r := *res
	r.BatchResults = nil
	return fmt.Sprintf("%+v (%d batch results)", r, len(res.BatchResults))
}

// checkInvariants asserts spec property 7 on a result.
func checkInvariants(t *testing.T, res *Result) {
	t.Helper()
	ok, bad, written := 0, 0, 0
	var failed []string
	for _, b := range res.BatchResults {
		if b.Success {
			ok++
			written += len(b.DistrictIDs)
		} else {
			bad++
			failed = append(failed, b.DistrictIDs...)
		}
	}
	if res.TotalBatches != len(res.BatchResults) || ok+bad != res.TotalBatches ||
		res.SuccessfulBatches != ok || res.FailedBatches != bad {
		t.Errorf("batch counts inconsistent: %+v", res)
	}
	// The chunks are the batches but the root's (batch 0), counted alone.
	root, rooted := res.Root()
	chunksOK, chunksBad := ok, bad
	if rooted {
		if root.Success {
			chunksOK--
		} else {
			chunksBad--
		}
	}
	if res.Chunks != chunksOK+chunksBad || res.SuccessfulChunks != chunksOK || res.FailedChunks != chunksBad ||
		rooted != (len(res.BatchResults) > 0) {
		t.Errorf("chunk counts inconsistent (root ran: %v): %+v", rooted, res)
	}
	if res.DistrictsWritten != written {
		t.Errorf("districtsWritten = %d, successful batches hold %d", res.DistrictsWritten, written)
	}
	sort.Strings(failed)
	got := append([]string(nil), res.FailedDistricts...)
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(failed) && !(len(got) == 0 && len(failed) == 0) {
		t.Errorf("failedDistricts = %v, failed batches hold %v", got, failed)
	}
	// complete() is the result's "complete" in JSON (see Outcome).
	if res.Complete() != (bad == 0) {
		t.Errorf("complete = %v (outcome %v) with %d failed batches", res.Complete(), res.Outcome, bad)
	}
}

// Properties 1, 2 and 9: chunk counts follow our layout (root alone, then
// ⌈n/50⌉ chunks of at most 50), and what is read back equals what was written.
func TestChunkCountsAndRoundTrip(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 49, 50, 51, 100, 132} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			eachForm(t, func(t *testing.T, e *env) {
				in := gen(n, int64(n))
				res := mustWrite(t, e.writer(), day, in)
				checkInvariants(t, res)
				if want := 1 + (n+49)/50; res.TotalBatches != want || res.Chunks != want-1 {
					t.Errorf("totalBatches = %d, chunks = %d; want %d and %d", res.TotalBatches, res.Chunks, want, want-1)
				}
				for _, b := range res.BatchResults {
					if b.OperationCount > 50 {
						t.Errorf("batch %d has %d operations", b.BatchIndex, b.OperationCount)
					}
				}
				if res.BatchResults[0].OperationCount != 1 || len(res.BatchResults[0].DistrictIDs) != 0 {
					t.Errorf("batch 0 is not the root alone: %+v", res.BatchResults[0])
				}
				for _, c := range e.f.commits() {
					if len(c.districts) > 50 {
						t.Errorf("a commit carried %d district writes", len(c.districts))
					}
				}
				if got := e.get(day); !model.Equal(got, in) {
					t.Errorf("read back differs: %s", model.Diff(got, in))
				}
				md := asMap(e.rootData(day)["metadata"])
				if md["status"] != in.Status || md["writeComplete"] != true || md["writerFence"] != res.Fence {
					t.Errorf("root metadata = status %v writeComplete %v fence %v", md["status"], md["writeComplete"], md["writerFence"])
				}
			})
		})
	}
}

// Property 3: the root commits, alone, before any district commit starts.
func TestRootCommitsBeforeAnyChunk(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		mustWrite(t, e.writer(WithConcurrency(8)), day, gen(132, 3))
		calls := e.f.commits()
		var rootEnd time.Time
		for _, c := range calls {
			if c.rootSet && len(c.districts) == 0 && c.err == nil {
				rootEnd = c.end
				break
			}
		}
		if rootEnd.IsZero() {
			t.Fatal("no root commit seen")
		}
		for _, c := range calls {
			if len(c.districts) > 0 {
				// A chunk records its districts in the root by transforms;
				// it never sets the root.
				if c.rootSet || c.fence {
					t.Errorf("commit %d mixes the root's or fence's write with districts", c.seq)
				}
				if c.start.Before(rootEnd) {
					t.Errorf("district commit %d started before the root commit returned", c.seq)
				}
			}
		}
	})
}

// Property 5: every retryable code is retried and nothing is lost.
func TestTransientFaultsAreRetried(t *testing.T) {
	t.Parallel()
	for _, code := range []codes.Code{codes.DeadlineExceeded, codes.Internal, codes.Aborted, codes.Unavailable, codes.ResourceExhausted} {
		t.Run(code.String(), func(t *testing.T) {
			t.Parallel()
			eachForm(t, func(t *testing.T, e *env) {
				in := gen(120, 11)
				var mu sync.Mutex
				failed := map[string]bool{}
				// Fail the first commit of every chunk once, and the root once.
				e.f.setRule(func(c *commitCall) error {
					key := "root"
					if len(c.districts) > 0 {
						key = c.districts[0]
					}
					mu.Lock()
					defer mu.Unlock()
					if failed[key] {
						return nil
					}
					failed[key] = true
					return status.Error(code, "injected")
				})
				res := mustWrite(t, e.writer(), day, in)
				checkInvariants(t, res)
				if code != codes.Unavailable && code != codes.ResourceExhausted {
					// The client library retries these two on Commit itself.
					for _, b := range res.BatchResults {
						if b.RetryAttempts < 1 {
							t.Errorf("batch %d: retryAttempts = %d, want ≥ 1", b.BatchIndex, b.RetryAttempts)
						}
					}
				}
				if got := e.get(day); !model.Equal(got, in) {
					t.Errorf("read back differs: %s", model.Diff(got, in))
				}
			})
		})
	}
}

// A random share of commits fails transiently; the write still completes
// and nothing is lost.
func TestRandomTransientFaults(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		in := gen(200, 5)
		rng := rand.New(rand.NewPCG(1, 2))
		var mu sync.Mutex
		codesList := []codes.Code{codes.DeadlineExceeded, codes.Internal, codes.Aborted}
		e.f.setRule(func(c *commitCall) error {
			mu.Lock()
			defer mu.Unlock()
			if rng.Float64() < 0.3 {
				return status.Error(codesList[rng.IntN(len(codesList))], "injected")
			}
			return nil
		})
		p := fastPolicy()
		p.MaxRetries = 8 // 0.3^9: a chunk failing every attempt would be a test bug
		res := mustWrite(t, e.writer(WithRetryPolicy(p), WithConcurrency(5)), day, in)
		checkInvariants(t, res)
		if got := e.get(day); !model.Equal(got, in) {
			t.Errorf("read back differs: %s", model.Diff(got, in))
		}
	})
}

// Properties 6 and 7: a chunk failing permanently leaves the others written
// and the manifest exact; the snapshot is partial.
func TestPermanentChunkFailureIsPartial(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		in := gen(132, 7)
		ids := layout.DistrictIDs(in)
		victim := ids[60] // in the second district chunk
		e.deny(victim)
		res := mustPartial(t)(e.writer().Write(context.Background(), day, in))
		checkInvariants(t, res)
		if res.Outcome != OutcomePartial || res.FailedBatches != 1 {
			t.Fatalf("want one failed batch, got %+v", res)
		}
		if n := e.f.commitsFor(victim); n != 1 {
			t.Errorf("a permanent failure was attempted %d times, want 1", n)
		}
		failed := map[string]bool{}
		for _, b := range res.BatchResults {
			if !b.Success {
				for _, d := range b.DistrictIDs {
					failed[d] = true
				}
			}
		}
		if !failed[victim] || len(failed) != 50 {
			t.Fatalf("failed districts = %d (victim in: %v), want the victim's chunk of 50", len(failed), failed[victim])
		}
		// Later chunks were still written.
		stored := map[string]bool{}
		for _, id := range e.stored(day) {
			stored[id] = true
		}
		for _, id := range ids {
			if stored[id] == failed[id] {
				t.Errorf("district %s: stored %v, failed %v", id, stored[id], failed[id])
			}
		}
		root := e.rootData(day)
		md, mf := asMap(root["metadata"]), asMap(root["manifest"])
		if md["status"] != "partial" || md["writeComplete"] != false {
			t.Errorf("metadata status %v writeComplete %v, want partial/false", md["status"], md["writeComplete"])
		}
		wf, _ := md["writeFailedDistricts"].([]any)
		if len(wf) != 50 {
			t.Errorf("writeFailedDistricts has %d entries, want 50", len(wf))
		}
		for _, x := range wf {
			if !failed[x.(string)] {
				t.Errorf("writeFailedDistricts names %v, which did not fail", x)
			}
		}
		if mf["failedDistricts"] != int64(50) || mf["successfulDistricts"] != int64(82) || mf["totalDistricts"] != int64(132) {
			t.Errorf("manifest counts = %v/%v/%v", mf["successfulDistricts"], mf["failedDistricts"], mf["totalDistricts"])
		}
		for _, x := range mf["districts"].([]any) {
			entry := asMap(x)
			id := entry["districtId"].(string)
			want := "success"
			if failed[id] {
				want = "failed"
				if msg, _ := entry["errorMessage"].(string); !strings.Contains(msg, "PermissionDenied") {
					t.Errorf("entry %s errorMessage = %q", id, msg)
				}
			}
			if entry["status"] != want {
				t.Errorf("manifest entry %s status %v, want %s", id, entry["status"], want)
			}
		}
		if s, err := NewReader(e.clean, "").Summary(context.Background(), day); err != nil || s.State != "partial" || len(s.FailedDistricts) != 50 {
			t.Errorf("summary = %+v, %v", s, err)
		}
	})
}

// Property 8: when the root cannot be written, no district is attempted.
func TestRootFailureWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.f.setRule(func(c *commitCall) error {
		if c.root {
			return status.Error(codes.Internal, "injected")
		}
		return nil
	})
	p := fastPolicy()
	p.MaxRetries = 2
	res, err := e.writer(WithRetryPolicy(p)).Write(context.Background(), day, gen(60, 1))
	if !errors.Is(err, ErrRootFailed) {
		t.Fatalf("err = %v, want ErrRootFailed", err)
	}
	if res == nil || res.Outcome != OutcomeNotWritten || len(res.BatchResults) != 1 || res.BatchResults[0].RetryAttempts != 2 {
		t.Errorf("result = %+v", res)
	}
	for _, c := range e.f.commits() {
		if len(c.districts) > 0 {
			t.Fatalf("a district commit was attempted after the root failed")
		}
	}
	if ids := e.stored(day); len(ids) != 0 {
		t.Errorf("districts stored: %v", ids)
	}
	if ok, _ := e.locker().IsLocked(context.Background(), e.lockKey(day)); ok {
		t.Error("lock still held after the write returned")
	}
}

// Retries stop at maxRetries: maxRetries+1 attempts, then the chunk fails.
func TestRetriesStopAtMaxRetries(t *testing.T) {
	t.Parallel()
	for _, max := range []int{0, 1, 3} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			in := gen(10, 2)
			victim := layout.DistrictIDs(in)[0]
			e.f.setRule(func(c *commitCall) error {
				if c.has(victim) {
					return status.Error(codes.DeadlineExceeded, "injected")
				}
				return nil
			})
			p := fastPolicy()
			p.MaxRetries = max
			res := mustPartial(t)(e.writer(WithRetryPolicy(p)).Write(context.Background(), day, in))
			if n := e.f.commitsFor(victim); n != max+1 {
				t.Errorf("chunk attempted %d times, want %d", n, max+1)
			}
			if r := res.BatchResults[1]; r.RetryAttempts != max || r.Success {
				t.Errorf("batch 1 = %+v", r)
			}
		})
	}
}

// Re-writing a date with fewer districts removes the dropped ones.
func TestRewriteRemovesDroppedDistricts(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		w := e.writer()
		mustWrite(t, w, day, gen(120, 4))
		smaller := gen(70, 4)
		res := mustWrite(t, w, day, smaller)
		if res.StaleDeleted != 50 {
			t.Errorf("staleDistrictsDeleted = %d, want 50", res.StaleDeleted)
		}
		if got, want := e.stored(day), sortedIDs(smaller); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("stored %d districts, want %d", len(got), len(want))
		}
		if got := e.get(day); !model.Equal(got, smaller) {
			t.Errorf("read back differs: %s", model.Diff(got, smaller))
		}
	})
}

// A held lock makes the write give up without writing anything.
func TestLockHeld(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	held, err := e.locker().Acquire(context.Background(), e.lockKey(day), time.Minute)
	if err != nil || !held.OK {
		t.Fatalf("pre-acquire: %+v %v", held, err)
	}
	_, err = e.writer(WithLockWait(300*time.Millisecond)).Write(context.Background(), day, gen(3, 1))
	if !errors.Is(err, ErrLockHeld) {
		t.Fatalf("err = %v, want ErrLockHeld", err)
	}
	if len(e.f.commits()) != 0 {
		t.Errorf("%d commits made while the lock was held", len(e.f.commits()))
	}
}

// Fencing: writer A stalls after its root commit, loses its lock without
// noticing, and B writes the snapshot. When A resumes, every chunk of A is
// refused, A ends fenced out, and B's data is intact.
func TestStaleWriterIsFencedOut(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		aIn, bIn := gen(120, 21), gen(80, 22)
		resume := make(chan struct{})
		rootDone := make(chan struct{})
		a := e.writer(WithLockTTL(time.Minute), withBeforeChunks(func(context.Context) { close(rootDone); <-resume }))
		type out struct {
			res *Result
			err error
		}
		aDone := make(chan out, 1)
		go func() {
			res, err := a.Write(ctx, day, aIn)
			aDone <- out{res, err}
		}()
		<-rootDone
		// A's lock "expires" (a GC pause, a partition): remove it behind A's back.
		if _, err := e.clean.Collection("locks").Doc(e.lockKey(day)).Delete(ctx); err != nil {
			t.Fatal(err)
		}
		bRes := mustWrite(t, e.writer(), day, bIn)
		close(resume)
		got := <-aDone
		if !errors.Is(got.err, ErrFencedOut) {
			t.Fatalf("A: err = %v, want ErrFencedOut", got.err)
		}
		if got.res.DistrictsWritten != 0 {
			t.Errorf("A wrote %d districts after being fenced out", got.res.DistrictsWritten)
		}
		if !fenceNewer(bRes.Fence, got.res.Fence) {
			t.Errorf("B's fence %s is not newer than A's %s", bRes.Fence, got.res.Fence)
		}
		if back := e.get(day); !model.Equal(back, bIn) {
			t.Errorf("B's snapshot was damaged: %s", model.Diff(back, bIn))
		}
		if md := asMap(e.rootData(day)["metadata"]); md["writerFence"] != bRes.Fence || md["writeComplete"] != true {
			t.Errorf("root metadata fence %v complete %v", md["writerFence"], md["writeComplete"])
		}
	})
}

// An older writer's root is refused outright once a newer fence is stored.
func TestOlderFenceCannotReplaceRoot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	mustWrite(t, e.writer(), day, gen(5, 1))
	// Forge a newer fence on the stored root, as a newer writer would leave.
	if _, err := e.clean.Collection(DefaultCollection).Doc(day).Update(ctx,
		[]firestore.Update{{Path: "metadata.writerFence", Value: "900000000000000"}}); err != nil {
		t.Fatal(err)
	}
	_, err := e.writer().Write(ctx, day, gen(6, 2))
	if !errors.Is(err, ErrFencedOut) {
		t.Fatalf("err = %v, want ErrFencedOut", err)
	}
	if n := len(e.stored(day)); n != 5 {
		t.Errorf("stored %d districts, want the newer writer's 5", n)
	}
}

// writeLosingLease writes 120 districts of day with a 3 s lock TTL,
// holding the write between its root and its chunks; there lose runs, and
// must make the lease's next extension fail (delete the lock document).
// The hook then waits for the loss to end the write's work context, and
// the write's result is returned. The TTL leaves each extend (every TTL/3)
// room on an emulator busy with the package's other tests: at 600 ms an
// extend timed out there before the root, and the loss came too early for
// the tests to mean anything.
func writeLosingLease(t *testing.T, e *env, lose func()) (*Result, error) {
	t.Helper()
	resume, rootDone := make(chan struct{}), make(chan struct{})
	w := e.writer(WithLockTTL(3*time.Second), withBeforeChunks(func(wctx context.Context) {
		close(rootDone)
		<-resume
		select {
		case <-wctx.Done():
		case <-time.After(30 * time.Second):
			t.Error("the lease was not lost within 30 s of its lock's deletion")
		}
	}))
	type out struct {
		res *Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := w.Write(context.Background(), day, gen(120, 9))
		done <- out{res, err}
	}()
	select {
	case <-rootDone:
	case got := <-done:
		t.Fatalf("the write ended before its chunks: %v", got.err)
	}
	lose()
	close(resume) // the heartbeat's next extend finds the lock gone
	got := <-done
	return got.res, got.err
}

// deleteLock deletes day's lock document, as if the lock had expired and
// been cleaned up.
func (e *env) deleteLock(t *testing.T) {
	t.Helper()
	if _, err := e.clean.Collection("locks").Doc(e.lockKey(day)).Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Lease loss: when the heartbeat cannot extend the lock, the remaining
// chunks are cancelled and the write ends with ErrLockLost (not fenced out:
// nobody else wrote), its manifest recorded.
func TestLeaseLossCancelsChunks(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		res, err := writeLosingLease(t, e, func() { e.deleteLock(t) })
		if !errors.Is(err, ErrLockLost) || !errors.Is(err, locking.ErrLeaseLost) || errors.Is(err, ErrFencedOut) {
			t.Fatalf("err = %v, want ErrLockLost wrapping ErrLeaseLost", err)
		}
		if !res.LockRenewals.Lost || res.Outcome != OutcomePartial {
			t.Errorf("result: lock lost %v, outcome %v; want lost, partial with the manifest recorded", res.LockRenewals.Lost, res.Outcome)
		}
		if res.DistrictsWritten != 0 || len(e.stored(day)) != 0 {
			t.Errorf("chunks ran after the lease was lost: %d written", res.DistrictsWritten)
		}
		for _, b := range res.BatchResults[1:] {
			// The batch's error is a value: the lease's loss, matched with errors.Is.
			if b.Success || !errors.Is(b.Err, locking.ErrLeaseLost) || !strings.Contains(b.Err.Error(), "not attempted") {
				t.Errorf("batch %d: %+v", b.BatchIndex, b)
			}
		}
		// The finish still recorded the outcome under our (still current) fence.
		if md := asMap(e.rootData(day)["metadata"]); md["status"] != "partial" {
			t.Errorf("root status %v, want partial", md["status"])
		}
	})
}

// A writer whose lease was lost and whose lock a newer writer has taken
// (a higher fence) does not run its finish (watchSuperseded): it would only
// contend with the newer writer's root transaction. It ends fenced out, its
// root untouched since its last record (still writing, never
// over-claiming).
func TestSupersededWriterSkipsItsFinish(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var before map[string]any
	res, err := writeLosingLease(t, e, func() {
		before = e.rootData(day)
		// The lock passes to a newer holder, which has not written yet.
		e.deleteLock(t)
		newer, err := e.locker().Acquire(context.Background(), e.lockKey(day), time.Minute)
		if err != nil || !newer.OK {
			t.Fatal(newer, err)
		}
	})
	if !errors.Is(err, ErrFencedOut) || res.Outcome != OutcomeFencedOut {
		t.Fatalf("err = %v, outcome %v; want fenced out, the manifest left to the newer writer", err, res.Outcome)
	}
	after := e.rootData(day)
	if md := asMap(after["metadata"]); md["writeState"] != layout.StateWriting || !reflect.DeepEqual(after["manifest"], before["manifest"]) {
		t.Errorf("the superseded writer's finish touched the root: writeState %v", md["writeState"])
	}
}

// A snapshot written under another lock backend is not replaced unless the
// operator allows the switch.
func TestLockBackendSwitch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	mustWrite(t, e.writer(), day, gen(3, 1))
	if _, err := e.clean.Collection(DefaultCollection).Doc(day).Update(ctx,
		[]firestore.Update{{Path: "metadata.writerLockBackend", Value: "postgres"}}); err != nil {
		t.Fatal(err)
	}
	_, err := e.writer().Write(ctx, day, gen(4, 2))
	if !errors.Is(err, ErrLockBackendSwitch) || !strings.Contains(err.Error(), "postgres") || !strings.Contains(err.Error(), "firestore") {
		t.Fatalf("err = %v, want ErrLockBackendSwitch naming both backends", err)
	}
	if n := len(e.stored(day)); n != 3 {
		t.Errorf("stored %d districts after a refused switch, want 3", n)
	}
	mustWrite(t, e.writer(WithAllowLockBackendSwitch(true)), day, gen(4, 2))
	if n := len(e.stored(day)); n != 4 {
		t.Errorf("stored %d districts after an allowed switch, want 4", n)
	}
}

// Invalid input is refused before the lock or any write.
func TestInvalidInputWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bad := gen(3, 1)
	bad.Payload.Districts[1].DistrictID = "no/slash"
	memData(bad.Payload.Districts[1])["districtId"] = "no/slash"
	_, err := e.writer().Write(context.Background(), day, bad)
	if !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("err = %v, want model.ErrInvalid", err)
	}
	if len(e.f.commits()) != 0 {
		t.Error("commits made for invalid input")
	}
}

func TestReaderListAndLatest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := e.writer()
	for _, d := range []string{"2026-11-18", "2026-11-19"} {
		s := model.Generate(d, 4, 1)
		mustWrite(t, w, d, s)
	}
	partial := model.Generate("2026-11-20", 60, 1)
	victim := partial.Payload.Districts[55].DistrictID
	e.deny(victim)
	mustPartial(t)(w.Write(ctx, "2026-11-20", partial))
	r := NewReader(e.clean, "")
	list, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range list {
		got = append(got, s.SnapshotID+":"+string(s.State))
	}
	if want := "[2026-11-20:partial 2026-11-19:complete 2026-11-18:complete]"; fmt.Sprint(got) != want {
		t.Errorf("List = %v, want %s", got, want)
	}
	if id, err := r.Latest(ctx); err != nil || id != "2026-11-19" {
		t.Errorf("Latest = %q, %v; want 2026-11-19", id, err)
	}
	if _, err := r.Get(ctx, "2026-01-01"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get missing: %v", err)
	}
}
