//go:build chaos

package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/snapwriter/snapwriter/internal/fsproxy"
)

// The rows of a store that pushes back (issue #35): the built binary
// against internal/fsproxy, a production-shaped store in front of the
// emulator that enforces Firestore's ramp for a new key range, a
// per-document write rate, and refuses what it is told to.

// refuseMidWrite starts `write --input in --json` with more args through
// store, and has store refuse commits as f says once a third of the
// chunks committed; the moment is when the refusals began.
func (s *scenario) refuseMidWrite(store *fsproxy.Proxy, f fsproxy.Fault, in *input, args ...string) (*proc, *moment) {
	fault := &moment{}
	match := afterChunks(chunks(midSnapshot) / 3)
	w := s.start(procSpec{name: "write", host: store.Addr(), limit: 5 * time.Minute,
		args: append([]string{"write", "--input", in.path, "--json"}, args...),
		onLine: func(_ *proc, e logEntry) {
			if match(e) && fault.set() {
				store.Inject(f)
			}
		}})
	return w, fault
}

// rateOf is what the checks read of a result's writeRate.
type rateOf struct {
	WriteRate struct {
		LimitPerSec       float64 `json:"limitPerSec"`
		MinLimitPerSec    float64 `json:"minLimitPerSec"`
		WaitedMs          int64   `json:"waitedMs"`
		ResourceExhausted int     `json:"resourceExhausted"`
		Aborted           int     `json:"aborted"`
		Slowdowns         int     `json:"slowdowns"`
	} `json:"writeRate"`
	LockRenewals struct {
		Count int `json:"count"`
	} `json:"lockRenewals"`
}

func (s *scenario) rate(p *proc) rateOf {
	var r rateOf
	if err := json.Unmarshal([]byte(strings.TrimSpace(p.stdoutString())), &r); err != nil {
		s.t.Errorf("%s: no JSON result: %v", p.spec.name, err)
	}
	return r
}

// Scenario 13a: a store that refuses every district commit with
// RESOURCE_EXHAUSTED for 60 s mid-write, then accepts again. The lock's
// renewals and the root's records are not district writes and go on. The
// writer slows down to its floor, retries past --max-retries within the
// chunks' total timeout, and completes: exit 0, get == input.
func TestPushBack60s(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "13a. every district commit refused (RESOURCE_EXHAUSTED) for 60 s mid-write")
	store := fsproxy.Start(t, emu.Host, fsproxy.Config{})
	in := generated(t, day, midSnapshot, 1)
	const outage = 60 * time.Second
	w, fault := s.refuseMidWrite(store, fsproxy.Fault{Code: codes.ResourceExhausted, Collection: "districts", For: outage}, in)
	ok := s.exited(w, 0)
	faultAt := fault.get()
	if faultAt.IsZero() {
		t.Fatalf("the write ended before the push-back began\n%s", w.describe())
	}
	if !ok {
		s.logWarnings(w)
	}
	st := store.Stats()
	if r := s.result(w); r != nil {
		rate := s.rate(w)
		if rate.WriteRate.ResourceExhausted == 0 || rate.WriteRate.Slowdowns == 0 {
			t.Errorf("writeRate %+v: want RESOURCE_EXHAUSTED answers that slowed the write", rate.WriteRate)
		}
		if rate.LockRenewals.Count < 5 {
			t.Errorf("%d lock renewals during a write that outlasted a 60 s push-back: want them to go on", rate.LockRenewals.Count)
		}
		s.note("write %.1f s, %d chunk commits refused, rate down to %.0f/s, chunks waited %.1f s for budget",
			float64(r.TotalDurationMs)/1000, st.Rejected[fsproxy.CauseInjected], rate.WriteRate.MinLimitPerSec,
			float64(rate.WriteRate.WaitedMs)/1000)
	}
	if ok {
		s.recovered(w.endedAt().Sub(faultAt.Add(outage)))
	}
	s.checkFinal(in, manifestOpts{})
}

// Scenario 13b: a 4-task backfill (four processes, --task-count 4), one
// date each, into one store that enforces 500/50/5 on the districts' key
// range. Each task takes a quarter of the budget: together they stay
// within the store's ramp, and it refuses (almost) nothing.
func TestBackfillSharesTheRamp(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "13b. 4-task backfill into a store that enforces 500/50/5")
	s.lost = notApplicable
	store := fsproxy.Start(t, emu.Host, fsproxy.Config{Ramp: fsproxy.Ramp{Collection: "districts", Start: 500}})
	dir := t.TempDir()
	dates := []string{"2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04"}
	for i, d := range dates {
		in := generated(t, d, midSnapshot, i+1)
		data, err := os.ReadFile(in.path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d+".json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Tasks are sharded by day number modulo the count, so each of the
	// four consecutive dates falls to its own task.
	var tasks []*proc
	for i := range 4 {
		tasks = append(tasks, s.start(procSpec{name: fmt.Sprintf("task %d", i), host: store.Addr(), limit: 3 * time.Minute,
			args: []string{"backfill", "--input-dir", dir, "--task-index", fmt.Sprint(i), "--task-count", "4"}}))
	}
	for _, p := range tasks {
		s.exited(p, 0)
	}
	st := store.Stats()
	refused := st.Rejected[fsproxy.CauseRamp]
	if refused*100 > st.Commits {
		t.Errorf("the store refused %d of %d commits for its ramp: want ≤ 1 %%", refused, st.Commits)
	}
	// 500/s, and at most one chunk of 50 of each task beyond it.
	if st.PeakRampWrites > 700 {
		t.Errorf("busiest second: %d district writes, want ≤ 700", st.PeakRampWrites)
	}
	s.note("busiest second %d district writes (sliding), %d of %d commits refused; busiest whole second %d",
		st.PeakRampWrites, refused, st.Commits, slices.Max(append(store.RampWritesPerSecond(), 0)))
	for i, d := range dates {
		s.date = d
		s.checkFinal(generated(t, d, midSnapshot, i+1), manifestOpts{})
	}
}

// Scenario 13c: a store that sustains one write a second per document (a
// burst of 2), as Firestore does: the write's single-document hot spots
// stay under it, the root's contention is not taken for a dead writer,
// and the write completes.
//
// "Under it" is the store's verdict: it refuses no commit for the
// document rate. The root gets its creation, progress records that land
// at least a second apart (each waits the interval from the previous
// one's return), and the finish, which may follow the last record at
// once, within the burst. Records spaced from their starts landed closer
// when a record was slower than the next, and the store refused the
// finish then in 1 write of 8 (13c alone). Writes−1 over the span from
// first to last is reported, not judged: that final pair is a burst, not
// a rate, and a write of 4–5 s came out over 1/s in 3 of 5 runs for it.
// The recorder's back-off hides much from this row — a recorder every
// 100 ms was refused in 1 run of 2 on a busy machine — so the pacing
// itself is TestRecorderPacing's to check, exactly, on a fake clock.
func TestHotDocumentRate(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "13c. a store that sustains 1 write/s per document")
	store := fsproxy.Start(t, emu.Host, fsproxy.Config{DocRate: 1, DocBurst: 2})
	in := generated(t, day, 2*midSnapshot, 1)
	w := s.run("write", store.Addr(), "write", "--input", in.path, "--json")
	s.exited(w, 0)
	s.result(w)
	if e, found := w.find(func(e logEntry) bool { return strings.Contains(e.Message, "writer that stopped mid-chunk") }); found {
		t.Errorf("the write's own root contention was taken for a dead writer: %s", e.Raw)
	}
	st := store.Stats()
	var worst []string
	for name, d := range st.Docs {
		what := hotDocument(name)
		if what == "" {
			continue
		}
		span := max(d.Last.Sub(d.First), time.Second)
		worst = append(worst, fmt.Sprintf("%s %d writes %.2f/s", what, d.Writes, float64(d.Writes-1)/span.Seconds()))
	}
	slices.Sort(worst)
	if n := st.Rejected[fsproxy.CauseDocumentRate]; n > 0 {
		t.Errorf("the store refused %d commits for the document rate: a document written faster than it sustains (%s)", n, strings.Join(worst, ", "))
	}
	s.note("%d commits refused for the document rate; %s", st.Rejected[fsproxy.CauseDocumentRate], strings.Join(worst, ", "))
	s.checkFinal(in, manifestOpts{})
}

// hotDocument names the single documents a write writes more than once
// — never the lock's key — and is "" for the others.
func hotDocument(name string) string {
	_, path, _ := strings.Cut(name, "/documents/")
	switch {
	case strings.HasPrefix(path, "locks/"):
		return "lock"
	case strings.HasPrefix(path, "fence_counters/"):
		return "fence counter"
	case strings.HasSuffix(path, "/snapwriter/fence"):
		return "fence"
	case strings.Count(path, "/") == 1 && strings.HasPrefix(path, "snapshots/"):
		return "root"
	}
	return ""
}

// Scenario 13d: a store that refuses every commit — the lock's renewals
// and the root's records too — for 60 s mid-write, past the lock's 10 s
// TTL. The lease is lost: the write starts no chunk after it and ends
// saying so (3, or 1 when its manifest could not be recorded either), and
// the same write rerun once the store accepts completes it.
func TestEverythingRefused60s(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "13d. every commit refused (RESOURCE_EXHAUSTED) for 60 s, past the 10 s TTL; then the same write")
	store := fsproxy.Start(t, emu.Host, fsproxy.Config{})
	in := generated(t, day, midSnapshot, 1)
	const outage = 60 * time.Second
	w, fault := s.refuseMidWrite(store, fsproxy.Fault{Code: codes.ResourceExhausted, For: outage}, in, "--lock-ttl", "10s")
	s.exited(w, 3, 1)
	faultAt := fault.get()
	if faultAt.IsZero() {
		t.Fatalf("the write ended before the refusals began\n%s", w.describe())
	}
	if _, found := w.find(func(e logEntry) bool {
		return strings.Contains(e.Message, "lost the lock") || strings.Contains(e.Message, "manifest was not recorded")
	}); !found {
		t.Errorf("the write did not say it lost its lock or could not record its manifest\n%s", w.describe())
	}
	sleepUntil(faultAt.Add(outage))
	rerun := s.run("rerun", store.Addr(), "write", "--input", in.path, "--json")
	if s.exited(rerun, 0) {
		s.recovered(rerun.endedAt().Sub(faultAt.Add(outage)))
		s.result(rerun)
	}
	s.checkFinal(in, manifestOpts{repairedFrom: []string{w.fence()}})
}
