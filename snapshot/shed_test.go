package snapshot

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/snapwriter/snapwriter/locking"
)

// The policy halves the chunks in flight for each renewal slower than
// TTL/6, down to one; grows them back by half for each renewal within
// TTL/12, up to the configured concurrency; holds them in between; and
// ignores the renewal that lost the lease.
func TestShedPolicy(t *testing.T) {
	const ttl = 6 * time.Second // slow: over 1 s; fast: up to 500 ms
	p := newShedPolicy(16, ttl)
	renewal := func(d time.Duration) locking.RenewalStat {
		return locking.RenewalStat{Latency: d, TTL: ttl, Attempts: 1}
	}
	for i, step := range []struct {
		stat  locking.RenewalStat
		limit int
		cut   bool
	}{
		{renewal(200 * time.Millisecond), 16, false}, // fast, already at the maximum
		{renewal(time.Second), 16, false},            // TTL/6 exactly: not slow
		{renewal(1001 * time.Millisecond), 8, true},  // slow: halved
		{renewal(2 * time.Second), 4, true},
		{renewal(900 * time.Millisecond), 4, false}, // between: held
		{renewal(501 * time.Millisecond), 4, false},
		{renewal(500 * time.Millisecond), 6, false}, // TTL/12 exactly: fast, +half
		{renewal(10 * time.Millisecond), 9, false},
		{renewal(3 * time.Second), 4, true},
		{renewal(3 * time.Second), 2, true},
		{renewal(3 * time.Second), 1, true},
		{renewal(3 * time.Second), 1, false}, // nothing left to shed
		{renewal(0), 2, false},               // +1 at least
		{renewal(0), 3, false},
		{renewal(0), 4, false},
		{renewal(0), 6, false},
		{renewal(0), 9, false},
		{renewal(0), 13, false},
		{renewal(0), 16, false}, // capped at the configured 16
		{locking.RenewalStat{Latency: 4 * time.Second, TTL: ttl, Err: locking.ErrLeaseLost}, 16, false},
	} {
		limit, cut := p.observe(step.stat)
		if limit != step.limit || cut != step.cut {
			t.Errorf("step %d (%s, err %v): limit %d, cut %v; want %d, %v", i, step.stat.Latency, step.stat.Err, limit, cut, step.limit, step.cut)
		}
	}
	want := LockRenewals{Count: 19, SlowestMs: 3000, Sheds: 5, MinConcurrency: 1}
	if p.stats != want {
		t.Errorf("stats %+v; want %+v (the lost renewal not counted)", p.stats, want)
	}
}

// A write that never sheds reports its configured concurrency as the
// least it ran.
func TestShedPolicyNeverShed(t *testing.T) {
	p := newShedPolicy(3, 30*time.Second)
	p.observe(locking.RenewalStat{Latency: 40 * time.Millisecond, TTL: 30 * time.Second})
	if want := (LockRenewals{Count: 1, SlowestMs: 40, MinConcurrency: 3}); p.stats != want {
		t.Errorf("stats %+v; want %+v", p.stats, want)
	}
}

// The shedder admits chunks up to the policy's limit: when a slow renewal
// cuts it, chunks already in flight run on and no new one starts until
// fewer than the new limit are in flight; when fast renewals raise it,
// waiting chunks start at once. One WARNING says when shedding started.
func TestShedderAdmitsUpToTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 6 * time.Second
		core, logs := observer.New(zapcore.DebugLevel)
		s := newShedder(4, ttl, zap.New(core))
		ctx := context.Background()
		for range 4 {
			if !s.enter(ctx, ctx) {
				t.Fatal("enter refused below the limit")
			}
		}
		admitted := make(chan int, 8)
		for i := range 3 {
			go func() {
				if s.enter(ctx, ctx) {
					admitted <- i
				}
			}()
		}
		synctest.Wait()
		if len(admitted) != 0 {
			t.Fatalf("%d chunks admitted beyond the limit of 4", len(admitted))
		}
		s.renewed(locking.RenewalStat{Latency: 2 * time.Second, TTL: ttl}) // limit 2
		s.leave()
		s.leave()
		synctest.Wait()
		if len(admitted) != 0 {
			t.Fatalf("%d chunks admitted with 2 in flight and a limit of 2", len(admitted))
		}
		s.leave()
		synctest.Wait()
		if len(admitted) != 1 {
			t.Fatalf("%d chunks admitted with 1 in flight and a limit of 2; want 1", len(admitted))
		}
		s.renewed(locking.RenewalStat{Latency: 3 * time.Second, TTL: ttl}) // limit 1: a second cut, no second warning
		s.renewed(locking.RenewalStat{Latency: 0, TTL: ttl})               // 2
		s.renewed(locking.RenewalStat{Latency: 0, TTL: ttl})               // 3
		synctest.Wait()
		if len(admitted) != 2 {
			t.Fatalf("%d chunks admitted after the limit grew to 3 with 2 in flight; want 2", len(admitted))
		}
		s.renewed(locking.RenewalStat{Latency: 0, TTL: ttl}) // 4
		synctest.Wait()
		if len(admitted) != 3 {
			t.Fatalf("%d chunks admitted after the limit grew to 4; want all 3", len(admitted))
		}
		warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
		if len(warns) != 1 {
			t.Fatalf("%d warnings; want one, when shedding started", len(warns))
		}
		f := warns[0].ContextMap()
		if f["renewalLatency"] != 2*time.Second || f["concurrency"] != int64(2) || f["configuredConcurrency"] != int64(4) {
			t.Errorf("warning fields %v; want the renewal's latency and the new concurrency", f)
		}
		if got := s.summary(); got != (LockRenewals{Count: 5, SlowestMs: 3000, Sheds: 2, MinConcurrency: 1}) {
			t.Errorf("summary %+v", got)
		}
	})
}

// A chunk waiting to start gives up when the write stops starting chunks
// (its start context ends) or its work context ends (the lease is lost),
// and takes no place in flight.
func TestShedderEnterStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newShedder(1, time.Second, zap.NewNop())
		bg := context.Background()
		if !s.enter(bg, bg) {
			t.Fatal("first enter refused")
		}
		for _, which := range []string{"start", "work"} {
			ctx, cancel := context.WithCancelCause(bg)
			done := make(chan bool, 1)
			go func() {
				if which == "start" {
					done <- s.enter(ctx, bg)
				} else {
					done <- s.enter(bg, ctx)
				}
			}()
			synctest.Wait()
			cancel(errors.New("stop"))
			if <-done {
				t.Errorf("enter admitted a chunk after its %s context ended", which)
			}
		}
		s.leave()
		if !s.enter(bg, bg) {
			t.Error("the give-ups took places in flight")
		}
	})
}

// slowRenewals is a lock backend whose extensions each take delay longer
// than the real backend's (fault injection): a lock store loaded as the
// writer's own chunks load it.
type slowRenewals struct {
	locking.Backend
	keyed locking.KeyedBackend

	mu    sync.Mutex
	delay time.Duration
}

func (s *slowRenewals) setDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

func (s *slowRenewals) ExtendKey(ctx context.Context, key, lockID string, ttl time.Duration) (locking.ExtendResult, error) {
	s.mu.Lock()
	d := s.delay
	s.mu.Unlock()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return locking.ExtendResult{}, &locking.Error{Code: locking.NetworkTimeout, Op: "extend", Err: ctx.Err()}
	}
	return s.keyed.ExtendKey(ctx, key, lockID, ttl)
}

func (s *slowRenewals) ReleaseKey(ctx context.Context, key, lockID string) (bool, error) {
	return s.keyed.ReleaseKey(ctx, key, lockID)
}

// heldCommits holds the chunks' commits until the test lets them go, so
// that the chunks in flight can be counted without racing them.
type heldCommits struct {
	mu      sync.Mutex
	n       int           // commits held now
	gate    chan struct{} // closed to let the held commits go
	open    bool          // gate is closed for good
	changed chan struct{} // a token when n changed
}

func newHeldCommits() *heldCommits {
	return &heldCommits{gate: make(chan struct{}), changed: make(chan struct{}, 1)}
}

// rule is the fault injector's rule: a commit of district documents waits
// at the gate.
func (h *heldCommits) rule(c *commitCall) error {
	if len(c.districts) == 0 {
		return nil
	}
	h.mu.Lock()
	h.n++
	gate := h.gate
	h.mu.Unlock()
	h.signal()
	select {
	case <-gate:
	case <-c.ctx.Done():
	}
	h.mu.Lock()
	h.n--
	h.mu.Unlock()
	h.signal()
	return nil
}

func (h *heldCommits) signal() {
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

func (h *heldCommits) held() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// release lets the commits held now go, and holds the next ones (or lets
// every later one through too, when hold is false).
func (h *heldCommits) release(hold bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.open {
		return
	}
	close(h.gate)
	if hold {
		h.gate = make(chan struct{})
	}
	h.open = !hold
}

// waitFor waits until cond holds, checking it whenever signal delivers; it
// fails the test after a minute.
func waitFor(t *testing.T, signal <-chan struct{}, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(time.Minute)
	for !cond() {
		select {
		case <-signal:
		case <-timeout:
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// Issue 25: a writer whose lock renewals slow down runs fewer chunks at
// once, and back up to its concurrency when they are fast again. The
// chunks' commits are held, so the chunks in flight are counted exactly:
// 8 (the concurrency) at first; after slow renewals (800 ms at a 3 s TTL,
// over TTL/6) at most the halved limit, although the 8 held commits were
// let go; 8 again once fast renewals have restored it. One WARNING says
// when the shedding started, and the Result reports it.
func TestWriterShedsChunksWhenRenewalsSlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fl := e.locker()
	slow := &slowRenewals{Backend: fl, keyed: fl, delay: 800 * time.Millisecond}
	hold := newHeldCommits()
	e.f.setRule(hold.rule)
	core, logs := observer.New(zapcore.DebugLevel)
	logged := make(chan struct{}, 1)
	log := zap.New(zapcore.RegisterHooks(core, func(zapcore.Entry) error {
		select {
		case logged <- struct{}{}:
		default:
		}
		return nil
	}))
	w, err := NewWriter(e.client, slow, WithAPIClient(e.api), WithRetryPolicy(fastPolicy()), WithLockWait(0),
		WithLockTTL(3*time.Second), WithConcurrency(8), WithBatchSize(5), WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	type out struct {
		res *Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := w.Write(context.Background(), day, gen(400, 3))
		done <- out{res, err}
	}()
	defer hold.release(false) // whatever happens, let the write end

	waitFor(t, hold.changed, "8 chunk commits in flight", func() bool { return hold.held() == 8 })
	const warning = "the lock's renewals are slow: running fewer chunks at once, so that the lock is not lost"
	waitFor(t, logged, "the shedding's warning", func() bool { return logs.FilterMessage(warning).Len() > 0 })
	limit := logs.FilterMessage(warning).All()[0].ContextMap()["concurrency"].(int64)
	if limit != 4 {
		t.Errorf("shed to %d chunks at once; want half of 8", limit)
	}
	// Let the 8 go: the chunks after them start only up to the limit.
	// The next renewal is slow too, and cuts the limit further; by then
	// the chunks admitted have long reached their commits.
	changes := func() []observer.LoggedEntry {
		return logs.FilterMessage("concurrency changed with the lock's renewal latency").All()
	}
	hold.release(true)
	waitFor(t, logged, "the next cut", func() bool { return len(changes()) > 0 })
	if n := hold.held(); n < 1 || n > int(limit) {
		t.Errorf("%d chunk commits in flight after the cut to %d", n, limit)
	}
	// Fast renewals again: the concurrency grows back to 8.
	slow.setDelay(0)
	waitFor(t, logged, "the concurrency back at 8", func() bool {
		c := changes()
		return c[len(c)-1].ContextMap()["concurrency"] == int64(8)
	})
	waitFor(t, hold.changed, "8 chunk commits in flight again", func() bool { return hold.held() == 8 })
	hold.release(false)
	got := <-done
	if got.err != nil || !got.res.Complete {
		t.Fatalf("write: %v", got.err)
	}
	r := got.res.LockRenewals
	if r.Sheds < 2 || r.MinConcurrency > 2 || r.SlowestMs < 800 || r.Count < 6 {
		t.Errorf("result's lockRenewals %+v; want 2 sheds or more, down to 2 or fewer, the slowest renewal ≥ 800 ms", r)
	}
	if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 1 {
		t.Errorf("%d warnings; want the one that said shedding started", n)
	}
	checkInvariants(t, got.res)
	t.Logf("%+v in %d ms", r, got.res.TotalDurationMs)
}
