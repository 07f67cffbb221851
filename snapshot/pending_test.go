package snapshot

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// The progress records put in the root the districts of a chunk that
// failed for good as failed, with its error and when it failed; a chunk
// of unknown outcome, or never attempted, stays not written yet (the
// finish decides it), as does every district not reached.
func TestProgressRecordsFailedChunks(t *testing.T) {
	s := newWritten()
	refused := status.Error(codes.PermissionDenied, "refused")
	s.add(BatchResult{Success: true, CommittedAt: time.Now(), DistrictIDs: []string{"1"}})
	s.add(BatchResult{Err: refused, DistrictIDs: []string{"2"}})
	s.add(BatchResult{Err: errors.New("connection reset"), unsure: true, DistrictIDs: []string{"3"}})
	s.add(BatchResult{Err: errors.New("not attempted: stopped"), notAttempted: true, DistrictIDs: []string{"4"}})
	st := s.progress()
	want := map[string]string{"1": layout.EntrySuccess, "2": layout.EntryFailed}
	if len(st.Entries) != len(want) || st.Entries["1"] != want["1"] || st.Entries["2"] != want["2"] {
		t.Errorf("progress entries %v, want %v (3 of unknown outcome and 4 never attempted stay not written yet)", st.Entries, want)
	}
	if st.Msgs["2"] != errText(refused) || st.Times["2"] == "" {
		t.Errorf("the failed district's message %q and time %q: want its chunk's error and when it failed", st.Msgs["2"], st.Times["2"])
	}
	// The finish records them all, the open ones as they were decided.
	fin := s.finished(layout.StatusPartial, false, time.Now())
	for _, id := range []string{"2", "3", "4"} {
		if fin.Entries[id] != layout.EntryFailed || fin.Msgs[id] == "" {
			t.Errorf("finished: district %s is %q (%q), want failed with its error", id, fin.Entries[id], fin.Msgs[id])
		}
	}
}

// A chunk that failed for good is news for the recorder as a written one
// is: it records the failure, with the manifest page holding its
// districts, without waiting for a chunk to commit. A chunk of unknown
// outcome is not news.
func TestRecorderRecordsFailedChunks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type record struct {
			st    layout.State
			pages []int
		}
		var mu sync.Mutex
		var records []record
		commit := func(_ context.Context, st layout.State, pages []int) error {
			mu.Lock()
			defer mu.Unlock()
			records = append(records, record{st, slices.Sorted(slices.Values(pages))})
			return nil
		}
		paged := func(id string) (int, bool) { return map[string]int{"a": 0, "b": 1, "c": 2}[id], true }
		r := (&recorder{commit: commit, paged: paged, every: time.Second, timeout: time.Minute, log: zap.NewNop()}).start(t.Context())
		r.add(BatchResult{Err: errors.New("lost"), unsure: true, DistrictIDs: []string{"c"}})
		time.Sleep(3 * time.Second)
		synctest.Wait()
		mu.Lock()
		if len(records) != 0 {
			t.Errorf("a chunk of unknown outcome was recorded: %+v", records)
		}
		mu.Unlock()
		r.add(BatchResult{Err: status.Error(codes.PermissionDenied, "refused"), DistrictIDs: []string{"b"}})
		time.Sleep(3 * time.Second)
		synctest.Wait()
		r.close()
		if len(records) != 1 {
			t.Fatalf("%d records after a chunk failed for good, want 1", len(records))
		}
		got := records[0]
		if got.st.Entries["b"] != layout.EntryFailed || !strings.Contains(got.st.Msgs["b"], "refused") || !slices.Equal(got.pages, []int{1}) {
			t.Errorf("record: entries %v, messages %v, pages %v; want b failed with its error, page 1", got.st.Entries, got.st.Msgs, got.pages)
		}
		if _, ok := got.st.Entries["c"]; ok {
			t.Errorf("the district of unknown outcome is recorded: %v", got.st.Entries)
		}
	})
}

// heldWrite is a write of 300 districts in chunks of 50, one at a time,
// held midway: its third chunk (districts 100–149) is refused for good,
// its fourth (150–199) stalls in its commit until release is closed, and
// the two after it are not reached while it does.
type heldWrite struct {
	ids      []string      // the input's districts, in order
	held     chan struct{} // closed once the fourth chunk's commit stalls
	release  chan struct{} // closed by go on: the fourth chunk goes on
	recorded chan struct{} // signalled after every progress record that lands
	dead     atomic.Bool   // set: every commit to the root is refused, as of a writer killed
	goOn     func()        // closes release (once)
	cancel   context.CancelFunc
	done     chan error // the write's error, once it returns
	res      *Result
}

// holdWrite starts a heldWrite of in under day on e.
func holdWrite(t *testing.T, e *env, in *model.Snapshot) *heldWrite {
	t.Helper()
	h := &heldWrite{ids: layout.DistrictIDs(in), held: make(chan struct{}), release: make(chan struct{}),
		recorded: make(chan struct{}, 1), done: make(chan error, 1)}
	h.goOn = sync.OnceFunc(func() { close(h.release) })
	// A test that fails first lets the write end.
	t.Cleanup(h.goOn)
	denied, stalled := h.ids[100], h.ids[150]
	var once sync.Once
	e.f.setRule(func(c *commitCall) error {
		switch {
		case c.root && h.dead.Load():
			return status.Error(codes.PermissionDenied, "injected: the writer is dead")
		case c.has(denied):
			return status.Error(codes.PermissionDenied, "injected refusal")
		case c.has(stalled):
			once.Do(func() {
				close(h.held)
				select {
				case <-h.release:
				case <-time.After(time.Minute):
					t.Error("the held chunk was never released")
				}
			})
		}
		return nil
	})
	e.f.setAfter(func(c *commitCall) error {
		if c.root && !c.rootSet && c.state == layout.StateWriting {
			select {
			case h.recorded <- struct{}{}:
			default:
			}
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	w := e.writer(WithConcurrency(1), WithBatchSize(50), WithRecordInterval(50*time.Millisecond))
	go func() {
		res, err := w.Write(ctx, day, in)
		h.res = res
		h.done <- err
	}()
	select {
	case <-h.held:
	case err := <-h.done:
		t.Fatalf("the write ended before its fourth chunk: %s, %v", brief(h.res), err)
	case <-time.After(time.Minute):
		t.Fatal("the fourth chunk was not reached within a minute")
	}
	return h
}

// waitRecorded waits until the root records the refused chunk as failed:
// the recorder records it with a progress record, whenever that lands.
func (h *heldWrite) waitRecorded(t *testing.T, r *Reader) {
	t.Helper()
	guard := time.After(time.Minute)
	for {
		s, err := r.Summary(context.Background(), day)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.FailedDistricts) > 0 {
			return
		}
		select {
		case <-h.recorded:
		case <-guard:
			t.Fatalf("no progress record recorded the refused chunk within a minute: %s, %d failed, %d pending",
				s.State, len(s.FailedDistricts), len(s.PendingDistricts))
		}
	}
}

// lists checks that List, Summary and Verify say snapshot day is in state
// want with the failed and pending districts given, and that Verify finds
// it intact.
func lists(t *testing.T, r *Reader, want State, failed, pending []string) *Report {
	t.Helper()
	ctx := context.Background()
	all, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(all, func(s Summary) bool { return s.SnapshotID == day })
	if i < 0 {
		t.Fatalf("List does not list %s", day)
	}
	listed := all[i]
	one, err := r.Summary(ctx, day)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Verify(ctx, day, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []struct {
		by              string
		state           State
		failed, pending []string
	}{
		{"List", listed.State, listed.FailedDistricts, listed.PendingDistricts},
		{"Summary", one.State, one.FailedDistricts, one.PendingDistricts},
		{"Verify", rep.State, rep.FailedDistricts, rep.PendingDistricts},
	} {
		if got.state != want || !slices.Equal(got.failed, failed) || !slices.Equal(got.pending, pending) {
			t.Errorf("%s: %s, %d failed %v, %d pending %v; want %s, %d failed %v, %d pending %v", got.by,
				got.state, len(got.failed), short(got.failed), len(got.pending), short(got.pending),
				want, len(failed), short(failed), len(pending), short(pending))
		}
	}
	if !rep.Intact {
		t.Errorf("Verify: problems %v", rep.Problems)
	}
	if w := len(rep.FailedDistricts) + len(rep.PendingDistricts) + rep.Written; w != rep.Districts {
		t.Errorf("Verify: %d written + %d failed + %d pending of %d districts", rep.Written, len(rep.FailedDistricts), len(rep.PendingDistricts), rep.Districts)
	}
	return rep
}

// runQuery is the method of queries.
const runQuery = "/google.firestore.v1.Firestore/RunQuery"

// short is ids cut for a message.
func short(ids []string) []string { return ids[:min(len(ids), 5)] }

// entryMessages are the errorMessages of the stored manifest's entries of
// snapshot id, by district.
func (e *env) entryMessages(id string) map[string]string {
	msgs := map[string]string{}
	for _, x := range asMap(e.rootData(id)["manifest"])["districts"].([]any) {
		em := asMap(x)
		msg, _ := em["errorMessage"].(string)
		msgs[em["districtId"].(string)] = msg
	}
	return msgs
}

// While a write is at work, the root records a chunk that failed as
// failed, with its error, and the districts its writer has not reached as
// not written yet: List, Summary and Verify tell the failed from the
// pending (before, every district not written counted as failed). The
// refused chunk's manifest pages, which no written district touched, are
// recorded too. Once the write has finished, nothing is pending. List
// reads the manifest (and its pages) of the root that says "writing" only.
func TestPendingWhileWriting(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		const finished = "2026-11-19"
		mustWrite(t, e.writer(), finished, model.Generate(finished, 30, 2))
		in := gen(300, 41)
		r := NewReader(e.clean, "", WithLockBackends(e.locker()))
		h := holdWrite(t, e, in)
		h.waitRecorded(t, r)
		ids := h.ids
		lists(t, r, StateWriting, ids[100:150], ids[150:])

		// One query for the listing; the writing root read whole, and its
		// pages; nothing of the finished snapshot's manifest.
		hook := &streamHook{before: func(string, int) bool { return false }, fn: func() {}}
		if _, err := NewReader(e.hookedClient(hook), "", WithLockBackends(e.locker())).List(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := map[string]int{runQuery: 1, batchGet: 1}
		if e.paged {
			want[runQuery]++
		}
		if !maps.Equal(hook.calls, want) {
			t.Errorf("List read %v, want %v", hook.calls, want)
		}
		msgs := e.entryMessages(day)
		for _, id := range ids[100:150] {
			if !strings.Contains(msgs[id], "PermissionDenied") {
				t.Fatalf("the refused district %s is recorded with %q, want its chunk's error", id, msgs[id])
			}
		}
		for _, id := range ids[150:] {
			if msgs[id] != layout.NotWrittenYet {
				t.Fatalf("district %s, not reached, is recorded with %q, want %q", id, msgs[id], layout.NotWrittenYet)
			}
		}

		h.goOn()
		if err := <-h.done; !errors.Is(err, ErrPartial) || h.res.Outcome != OutcomePartial {
			t.Fatalf("the write: %s, %v; want partial", brief(h.res), err)
		}
		lists(t, r, StatePartial, ids[100:150], []string{})
	})
}

// A writer killed midway leaves its root "writing" with no live lock:
// the districts it never reached are pending, the chunk it saw refused
// failed; those it wrote in its last moments without recording them are
// pending too, and Verify counts them. A repair writes the failed as
// failed and the pending it must (it keeps the ones stored), and leaves
// nothing pending.
func TestPendingOfAnInterruptedWrite(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		in := gen(300, 43)
		r := NewReader(e.clean, "", WithLockBackends(e.locker()))
		h := holdWrite(t, e, in)
		h.waitRecorded(t, r)
		// The writer dies: nothing more reaches its root, no chunk
		// starts, and the held one lands unrecorded.
		h.dead.Store(true)
		h.cancel()
		h.goOn()
		if err := <-h.done; !errors.Is(err, ErrManifestNotRecorded) {
			t.Fatalf("the dying write: %s, %v; want ErrManifestNotRecorded", brief(h.res), err)
		}
		e.f.setRule(nil)
		e.f.setAfter(nil)
		ids := h.ids
		rep := lists(t, r, StateInterrupted, ids[100:150], ids[150:])
		if rep.NotYetRecorded != 50 {
			t.Errorf("Verify: %d districts not yet recorded, want the 50 of the chunk that landed after the last record", rep.NotYetRecorded)
		}

		pl, err := e.writer().Planner().PlanRepair(ctx, day, in)
		if err != nil {
			t.Fatal(err)
		}
		reasons := map[RewriteReason][]string{}
		for _, d := range pl.Rewrite {
			reasons[d.Reason] = append(reasons[d.Reason], d.DistrictID)
		}
		if !slices.Equal(reasons[RewriteFailed], ids[100:150]) || !slices.Equal(reasons[RewritePending], ids[200:]) || len(reasons) != 2 {
			t.Errorf("repair plan: failed %v, pending %v, %d reasons; want the refused chunk failed, the never reached pending",
				short(reasons[RewriteFailed]), short(reasons[RewritePending]), len(reasons))
		}
		if res, err := e.writer().Repair(ctx, day, in); err != nil || res.Outcome != OutcomeComplete {
			why := ""
			if res != nil {
				why = firstFailure(res)
			}
			t.Fatalf("repair: %s, %v (%s)", brief(res), err, why)
		}
		lists(t, r, StateComplete, []string{}, []string{})
	})
}
