package snapshot

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// The recorder's pacing, on a fake clock: each record starts at least an
// interval after the one before returned, whatever the chunks do — so
// that records land at the store at least that far apart whatever their
// latency — each district is recorded within interval + 2 commits of its
// chunk's commit (the record under way then, and the next), and a
// record that fails is retried with what came since.
func TestRecorderPacing(t *testing.T) {
	for _, tc := range []struct {
		name           string
		every, commit  time.Duration
		gap            time.Duration // between chunk commits
		failEveryNth   int           // a record attempt that fails (0: none)
		wantMaxRecords int
	}{
		{name: "commits shorter than the interval", every: time.Second, commit: 300 * time.Millisecond, gap: 70 * time.Millisecond, wantMaxRecords: 4},
		{name: "commits longer than the interval", every: time.Second, commit: 1500 * time.Millisecond, gap: 20 * time.Millisecond, wantMaxRecords: 3},
		{name: "some records fail", every: time.Second, commit: 200 * time.Millisecond, gap: 90 * time.Millisecond, failEveryNth: 2, wantMaxRecords: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				type record struct {
					start, end time.Time
					ids        map[string]bool
				}
				var mu sync.Mutex
				var records []record
				attempts := 0
				commit := func(ctx context.Context, st layout.State, pages []int) error {
					start := time.Now()
					mu.Lock()
					attempts++
					fail := tc.failEveryNth > 0 && attempts%tc.failEveryNth == 0
					mu.Unlock()
					select {
					case <-time.After(tc.commit):
					case <-ctx.Done():
						return ctx.Err()
					}
					if fail {
						return status.Error(codes.Unavailable, "injected")
					}
					ids := map[string]bool{}
					for id, e := range st.Entries {
						if e == layout.EntrySuccess {
							ids[id] = true
						}
					}
					mu.Lock()
					records = append(records, record{start, time.Now(), ids})
					mu.Unlock()
					return nil
				}
				paged := func(string) (int, bool) { return 0, false }
				r := (&recorder{commit: commit, paged: paged, every: tc.every, timeout: time.Minute, log: zap.NewNop()}).start(t.Context())
				added := map[string]time.Time{}
				for i := range 40 {
					id := fmt.Sprint(i)
					added[id] = time.Now()
					r.add(BatchResult{Success: true, DistrictIDs: []string{id}, CommittedAt: time.Now()})
					time.Sleep(tc.gap)
				}
				// Let everything be recorded, then stop.
				time.Sleep(3*tc.every + 3*tc.commit)
				synctest.Wait()
				r.close()

				if len(records) > tc.wantMaxRecords+1 {
					t.Errorf("%d records for 40 chunks over %s, want at most %d", len(records), 40*tc.gap, tc.wantMaxRecords+1)
				}
				for i := 1; i < len(records); i++ {
					if d := records[i].start.Sub(records[i-1].end); d < tc.every {
						t.Errorf("record %d started %s after record %d returned, under the interval %s", i, d, i-1, tc.every)
					}
				}
				bound := tc.every + 2*tc.commit
				if tc.failEveryNth > 0 {
					bound += tc.every + tc.commit // the failed record's turn
				}
				for id, at := range added {
					first := -1
					for i, rec := range records {
						if rec.ids[id] {
							first = i
							break
						}
					}
					if first < 0 {
						t.Fatalf("district %s never recorded", id)
					}
					if lag := records[first].end.Sub(at); lag > bound {
						t.Errorf("district %s recorded %s after its chunk committed, over %s", id, lag, bound)
					}
					for _, rec := range records[first:] {
						if !rec.ids[id] {
							t.Errorf("district %s dropped from a later record", id)
						}
					}
				}
			})
		})
	}
}

// progressRun is what writeWatched saw of a write.
type progressRun struct {
	res     *Result
	err     error
	commits []commitCall
	wall    time.Duration
	polls   int // reads of the root taken while the write was at work
	lagging int // of them, reads that found documents not recorded yet
}

// writeWatched writes in under id while a reader polls the root and the
// district documents, checking at every poll that the root never lists a
// district as written whose document is absent (what the application's
// readers would then fail on).
func writeWatched(t *testing.T, e *env, id string, in *model.Snapshot, opts ...Option) progressRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var run progressRun
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			recorded, ok := e.recordedNow(ctx, id)
			if !ok {
				continue
			}
			present := e.presentNow(ctx, id)
			if present == nil {
				continue
			}
			run.polls++
			for d := range recorded {
				if !present[d] {
					t.Errorf("the root lists district %s as written; its document is absent", d)
				}
			}
			if len(present) > len(recorded) {
				run.lagging++
			}
		}
	})
	t0 := time.Now()
	run.res, run.err = e.writer(opts...).Write(context.Background(), id, in)
	run.wall = time.Since(t0)
	cancel()
	wg.Wait()
	run.commits = e.f.commits()
	return run
}

// recordedNow is the set of districts the stored root records as written
// (false when there is no root yet or it could not be read).
func (e *env) recordedNow(ctx context.Context, id string) (map[string]bool, bool) {
	ref := e.clean.Collection(DefaultCollection).Doc(id)
	doc, err := ref.Get(ctx)
	if err != nil {
		return nil, false
	}
	root := doc.Data()
	if pagedRoot(root) {
		pages, err := ref.Collection(layout.PagesCollection).Documents(ctx).GetAll()
		if err != nil {
			return nil, false
		}
		expandPages(root, pages)
	}
	set := map[string]bool{}
	for _, x := range asMap(root["manifest"])["districts"].([]any) {
		if em := asMap(x); em["status"] == layout.EntrySuccess {
			set[em["districtId"].(string)] = true
		}
	}
	// The lists the application reads must say the same.
	for _, x := range asMap(root["metadata"])["successfulDistricts"].([]any) {
		if !set[x.(string)] {
			e.t.Errorf("metadata.successfulDistricts lists %v, the manifest does not record it", x)
		}
	}
	return set, true
}

// presentNow is the set of district documents stored (nil on an error):
// read after the root, so a district the root recorded is present unless
// the root over-claims.
func (e *env) presentNow(ctx context.Context, id string) map[string]bool {
	docs, err := e.clean.Collection(DefaultCollection).Doc(id).Collection("districts").Select().Documents(ctx).GetAll()
	if err != nil {
		return nil
	}
	set := make(map[string]bool, len(docs))
	for _, d := range docs {
		set[strings.TrimPrefix(d.Ref.ID, "district_")] = true
	}
	return set
}

// Chunk commits write district documents and nothing else, whatever the
// concurrency, and the root is written about once a record interval:
// commits to the root number at most the write's seconds + 5, and the
// Result says how many. The root never lists a district whose document is
// absent, and each district is recorded within an interval plus a couple
// of commits of its chunk's commit. (On the writer that recorded every
// chunk in the root, 1,000 districts cost 2 root writes per chunk: 40.)
func TestChunksLeaveTheRootToTheRecorder(t *testing.T) {
	t.Parallel()
	for _, conc := range []int{3, 16} {
		t.Run(fmt.Sprintf("c%d", conc), func(t *testing.T) {
			t.Parallel()
			eachForm(t, func(t *testing.T, e *env) {
				in := gen(1000, int64(conc))
				core, logs := observer.New(zapcore.DebugLevel)
				run := writeWatched(t, e, day, in, WithConcurrency(conc), WithLogger(zap.New(core)))
				if run.err != nil || run.res.Outcome != OutcomeComplete {
					t.Fatalf("write: %s, %v", brief(run.res), run.err)
				}
				roots := 0
				var records []commitCall
				chunkEnd := map[string]time.Time{}
				for _, c := range run.commits {
					if len(c.districts) > 0 && (c.root || c.pages > 0 || c.fence) {
						t.Errorf("commit %d writes districts and the root (%v), manifest pages (%d) or the fence document (%v)", c.seq, c.root, c.pages, c.fence)
					}
					if c.err != nil {
						continue
					}
					if c.root {
						roots++
						records = append(records, c)
					}
					for _, d := range c.districts {
						chunkEnd[d] = c.end
					}
				}
				if roots != run.res.RootCommits {
					t.Errorf("%d commits wrote the root, Result.RootCommits = %d", roots, run.res.RootCommits)
				}
				if limit := int(math.Ceil(run.wall.Seconds())) + 5; roots > limit {
					t.Errorf("%d root commits in a %s write, over seconds + 5 = %d", roots, run.wall.Round(time.Millisecond), limit)
				}
				if roots < 2 {
					t.Errorf("%d root commits: want the root and the finish at least", roots)
				}
				// The lag of each district: from its chunk's commit to the
				// first root commit that records it, against the interval
				// and the record transactions' own time (begin, reads,
				// commit: on a loaded emulator, seconds).
				var worst time.Duration
				longest := time.Duration(0)
				attempts := 0
				for _, msg := range []string{"progress recorded", "progress not recorded"} {
					for _, l := range logs.FilterMessage(msg).All() {
						attempts++
						longest = max(longest, time.Duration(l.ContextMap()["durationMs"].(int64))*time.Millisecond)
					}
				}
				if attempts == 0 {
					t.Error("the recorder never tried to record")
				}
				// The finish records what the last record did not.
				if f, d := logs.FilterMessage("recording the manifest").All(), logs.FilterMessage("snapshot write finished").All(); len(f) == 1 && len(d) == 1 {
					longest = max(longest, d[0].Time.Sub(f[0].Time))
				}
				for d, end := range chunkEnd {
					for _, r := range records {
						if slices.Contains(r.recorded, d) && r.end.After(end) {
							worst = max(worst, r.end.Sub(end))
							break
						}
					}
				}
				bound := DefaultRecordInterval + 2*longest + time.Second // + scheduling on a loaded machine
				if worst > bound {
					t.Errorf("a district was recorded %s after its chunk committed, over the interval + two root transactions (%s)", worst, bound)
				}
				t.Logf("c%d: %d districts, %s, %d root commits (%d record attempts, longest root transaction %s), %d polls (%d lagging), worst lag %s",
					conc, len(in.Payload.Districts), run.wall.Round(time.Millisecond), roots, attempts, longest.Round(time.Millisecond), run.polls, run.lagging, worst.Round(time.Millisecond))
				if got := e.get(day); !model.Equal(got, in) {
					t.Errorf("read back differs: %s", model.Diff(got, in))
				}
			})
		})
	}
}

// deadRecorder makes e's writes die, to all appearances, after their
// root commit and `records` progress records: every later commit to the
// root is refused for good, the finish's too (ErrManifestNotRecorded), and
// the district documents written since are stored but not recorded — a
// writer killed mid-write.
func (e *env) deadRecorder(records int) {
	var mu sync.Mutex
	roots := 0
	e.f.setRule(func(c *commitCall) error {
		if !c.root {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		roots++
		if roots > 1+records {
			return status.Error(codes.PermissionDenied, "injected: the writer is dead")
		}
		return nil
	})
}

// A writer that dies between recording and finishing leaves districts
// written but not recorded, their documents stamped with its fence. The
// root never claims them; Verify counts them and finds nothing wrong;
// Repair, and a rerun of the same write, record them without writing
// them again and write only what is truly missing (here: the districts of
// a chunk that was refused). On the writer before the recorder, Repair
// rewrote every district the root did not record.
func TestUnrecordedDistrictsAreRecordedNotRewritten(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"repair", "rerun"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			eachForm(t, func(t *testing.T, e *env) {
				ctx := context.Background()
				in := gen(300, 7)
				denied := in.Payload.Districts[123].DistrictID
				e.deadRecorder(1)
				rule := e.f.rule
				e.f.setRule(func(c *commitCall) error {
					if c.has(denied) {
						return status.Error(codes.PermissionDenied, "injected")
					}
					return rule(c)
				})
				// Records every 50 ms: the one allowed lands mid-write.
				res, err := e.writer(WithRecordInterval(50*time.Millisecond)).Write(ctx, day, in)
				if !errors.Is(err, ErrManifestNotRecorded) {
					t.Fatalf("dying write: %s, %v; want ErrManifestNotRecorded", brief(res), err)
				}
				e.f.setRule(nil)

				recorded, _ := e.recordedNow(ctx, day)
				present := e.presentNow(ctx, day)
				unrecorded := 0
				for d := range present {
					if !recorded[d] {
						unrecorded++
					}
				}
				for d := range recorded {
					if !present[d] {
						t.Errorf("the root records %s, which is not stored", d)
					}
				}
				if unrecorded == 0 || len(present) != len(in.Payload.Districts)-50 {
					t.Fatalf("after the dying write: %d stored, %d recorded; want all but the refused chunk stored, some not recorded", len(present), len(recorded))
				}
				rep, err := NewReader(e.clean, "").Verify(ctx, day, in)
				if err != nil || !rep.Intact || rep.NotYetRecorded != unrecorded {
					t.Fatalf("verify of the interrupted write: %+v, %v; want intact with %d not yet recorded", rep, err, unrecorded)
				}
				if got := e.get(day); len(got.Payload.Districts) != len(recorded) {
					t.Errorf("get returns %d districts of an interrupted write whose root records %d", len(got.Payload.Districts), len(recorded))
				}

				before := len(e.f.commits())
				w := e.writer()
				if how == "repair" {
					res, err = w.Repair(ctx, day, in)
				} else {
					res, err = w.Write(ctx, day, in)
				}
				if err != nil || res.Outcome != OutcomeComplete {
					t.Fatalf("%s: %s, %v", how, brief(res), err)
				}
				rewritten := map[string]bool{}
				for _, c := range e.f.commits()[before:] {
					for _, d := range c.districts {
						rewritten[d] = true
					}
				}
				for d := range present {
					if rewritten[d] {
						t.Errorf("%s rewrote district %s, which was stored intact", how, d)
					}
				}
				if len(rewritten) != 50 || !rewritten[denied] {
					t.Errorf("%s wrote %d districts, want the 50 of the refused chunk", how, len(rewritten))
				}
				if res.DistrictsKept != len(present) || res.DistrictsWritten != 50 {
					t.Errorf("%s: %d kept, %d written; want %d and 50", how, res.DistrictsKept, res.DistrictsWritten, len(present))
				}
				if got := e.get(day); !model.Equal(got, in) {
					t.Errorf("read back differs: %s", model.Diff(got, in))
				}
				rep, err = NewReader(e.clean, "").Verify(ctx, day, in)
				if err != nil || !rep.Intact || !rep.Complete || rep.NotYetRecorded != 0 {
					t.Errorf("verify after %s: %+v, %v", how, rep, err)
				}
			})
		})
	}
}

// A store that refuses the root's records for contention (ABORTED, as
// Firestore answers a document written faster than it sustains) spaces
// them out — the interval doubles, up to maxRecordBackoff intervals — and
// records that succeed bring it back an interval at a time. The first
// record keeps the interval from the root's commit too.
func TestRecorderBacksOffOnContention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var starts []time.Time
		refuse := 5 // the first five records are refused
		commit := func(ctx context.Context, st layout.State, pages []int) error {
			mu.Lock()
			defer mu.Unlock()
			starts = append(starts, time.Now())
			if refuse > 0 {
				refuse--
				return status.Error(codes.Aborted, "Too much contention on these documents. Please try again.")
			}
			return nil
		}
		paged := func(string) (int, bool) { return 0, false }
		rootCommit := time.Now()
		r := (&recorder{commit: commit, paged: paged, every: time.Second, timeout: time.Minute,
			log: zap.NewNop(), since: rootCommit}).start(t.Context())
		// A chunk commits every 100 ms for a minute: there is always news.
		for i := range 600 {
			r.add(BatchResult{Success: true, DistrictIDs: []string{fmt.Sprint(i)}, CommittedAt: time.Now()})
			time.Sleep(100 * time.Millisecond)
		}
		r.close()
		mu.Lock()
		defer mu.Unlock()
		if d := starts[0].Sub(rootCommit); d < time.Second {
			t.Errorf("first record %s after the root's commit, want ≥ 1 s", d)
		}
		// Refused 5 times: gaps of 2, 4, 8, 8, 8 s; then 7, 6, … 1 s as
		// records succeed.
		want := []time.Duration{2, 4, 8, 8, 8, 7, 6, 5, 4, 3, 2, 1, 1}
		for i, w := range want {
			if i+1 >= len(starts) {
				t.Fatalf("only %d records", len(starts))
			}
			gap := starts[i+1].Sub(starts[i])
			if gap < w*time.Second || gap > w*time.Second+100*time.Millisecond {
				t.Errorf("gap %d: %s, want %d s", i, gap, w)
			}
		}
	})
}
