package snapshot

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/snapwriter/snapwriter/locking"
)

// The policy starts at one chunk and adds one a round trip (for a chunk
// admitted since the last change, answered within TTL/12 of the fastest,
// while the last renewal was as fast); a chunk that queued more than
// TTL/6 halves the limit, and so does a renewal slower than TTL/6;
// between the thresholds it holds; stale signals — a chunk admitted or a
// renewal sent before the last change — are ignored.
func TestShedPolicy(t *testing.T) {
	const ttl = 6 * time.Second // slow: over 1 s; fast: up to 500 ms
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	now := time.Unix(1_800_000_000, 0)
	p := newShedPolicy(16, ttl)
	type want struct {
		limit int
		cut   bool
	}
	chunk := func(step string, latency time.Duration, epoch int, w want) {
		t.Helper()
		now = now.Add(latency)
		if limit, cut := p.chunk(latency, epoch, now); limit != w.limit || cut != w.cut {
			t.Errorf("%s: chunk of %s in epoch %d: limit %d, cut %v; want %d, %v", step, latency, epoch, limit, cut, w.limit, w.cut)
		}
	}
	renewal := func(step string, latency time.Duration, err error, w want) {
		t.Helper()
		now = now.Add(latency)
		if limit, cut := p.renewal(locking.RenewalStat{Latency: latency, TTL: ttl, Attempts: 1, Err: err}, now); limit != w.limit || cut != w.cut {
			t.Errorf("%s: renewal of %s: limit %d, cut %v; want %d, %v", step, latency, limit, cut, w.limit, w.cut)
		}
	}
	if p.limit != 1 || p.admits() != 1 {
		t.Fatalf("starts at %d chunks; want 1", p.limit)
	}
	chunk("first, the fastest", ms(100), 0, want{2, false}) // epoch 1
	chunk("stale: admitted before the growth", ms(100), 0, want{2, false})
	for n := 3; n <= 16; n++ {
		chunk("one a round trip", ms(100+500), p.epoch, want{n, false}) // 500 ms over the fastest: still fast
	}
	chunk("capped", ms(100), p.epoch, want{16, false})
	chunk("hold band", ms(100+700), p.epoch, want{16, false})
	e := p.epoch
	chunk("queued past TTL/6", ms(100+1001), e, want{8, true})
	chunk("stale: admitted before the halving", ms(100+5000), e, want{8, false})
	renewal("renewal within TTL/6", ms(1000), nil, want{8, false})
	chunk("fast chunk, last renewal in the hold band: no growth", ms(100), p.epoch, want{8, false})
	renewal("fast renewal", ms(400), nil, want{8, false})
	chunk("fast chunk, fast renewal", ms(100), p.epoch, want{9, false})
	renewal("slow renewal", ms(1001), nil, want{4, true})
	now = now.Add(-ms(500)) // a renewal sent before that halving, ending 500 ms after it:
	renewal("stale renewal", ms(2000), nil, want{4, false})
	renewal("slow renewal sent as the last ended", ms(1500), nil, want{2, true})
	renewal("again", ms(1500), nil, want{1, true})
	renewal("nothing left to halve", ms(1500), nil, want{1, false})
	chunk("nothing left to halve", ms(100+2000), p.epoch, want{1, false})
	if !p.overdue() || p.admits() != 0 || p.overdue() {
		t.Errorf("an overdue renewal: admits %d; want a pause (once)", p.admits())
	}
	renewal("the overdue renewal answered", ms(1100), nil, want{1, false})
	if p.admits() != 1 {
		t.Errorf("admits %d after the overdue renewal was answered; want 1", p.admits())
	}
	renewal("the renewal that lost the lease", ms(4000), locking.ErrLeaseLost, want{1, false})
	if w := (LockRenewals{Count: 8, SlowestMs: 2000, Sheds: 4, MinConcurrency: 1, Pauses: 1}); p.stats != w {
		t.Errorf("stats %+v; want %+v (the lost renewal not counted)", p.stats, w)
	}
}

// A write that never shed reports its configured concurrency as the
// fewest chunks at once, slow start or not.
func TestShedPolicyNeverShed(t *testing.T) {
	p := newShedPolicy(3, 30*time.Second)
	p.renewal(locking.RenewalStat{Latency: 40 * time.Millisecond, TTL: 30 * time.Second}, time.Now())
	if want := (LockRenewals{Count: 1, SlowestMs: 40, MinConcurrency: 3}); p.stats != want {
		t.Errorf("stats %+v; want %+v", p.stats, want)
	}
}

// The shedder admits chunks up to the policy's limit: when a slow renewal
// halves it, chunks already in flight run on and no new one starts until
// fewer than the new limit are in flight; as fast chunks raise it, waiting
// chunks start. One WARNING says when shedding started.
func TestShedderAdmitsUpToTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 6 * time.Second
		core, logs := observer.New(zapcore.DebugLevel)
		s := newShedder(4, ttl, zap.New(core))
		ctx := context.Background()
		fast := 10 * time.Millisecond
		// 1, then one more per fast chunk admitted since the last change,
		// up to 4: each chunk here ends before the next starts.
		for n := 1; n <= 4; n++ {
			epoch, ok := s.enter(ctx, ctx)
			if !ok {
				t.Fatalf("enter refused chunk %d", n)
			}
			s.committed(fast, epoch)
			s.leave()
		}
		for n := 1; n <= 4; n++ {
			if _, ok := s.enter(ctx, ctx); !ok {
				t.Fatalf("enter refused chunk %d in flight", n)
			}
		}
		admitted := make(chan int, 8)
		waiting, stopWaiting := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				if _, ok := s.enter(waiting, ctx); ok {
					admitted <- i
				}
			})
		}
		defer func() {
			stopWaiting() // the one still waiting gives up
			wg.Wait()
		}()
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
		// Within TTL/2 of the slow renewal's send: no renewal is overdue.
		time.Sleep(900 * time.Millisecond)
		s.renewed(locking.RenewalStat{Latency: 100 * time.Millisecond, TTL: ttl})
		halved := s.policy.epoch
		s.committed(fast, halved) // a chunk admitted since the halving: 3
		synctest.Wait()
		if len(admitted) != 2 {
			t.Fatalf("%d chunks admitted after the limit grew to 3 with 2 in flight; want 2", len(admitted))
		}
		s.committed(fast, halved) // stale: admitted before the growth
		synctest.Wait()
		if len(admitted) != 2 {
			t.Fatalf("%d chunks admitted after a stale signal; want still 2", len(admitted))
		}
		time.Sleep(2 * time.Second)                                        // sent after the first halving
		s.renewed(locking.RenewalStat{Latency: 2 * time.Second, TTL: ttl}) // 1: a second halving, no second warning
		warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
		if len(warns) != 1 {
			t.Fatalf("%d warnings; want one, when shedding started", len(warns))
		}
		f := warns[0].ContextMap()
		if f["renewalLatency"] != 2*time.Second || f["concurrency"] != int64(2) || f["configuredConcurrency"] != int64(4) || f["signal"] != "a lock renewal" {
			t.Errorf("warning fields %v; want the renewal's latency and the new concurrency", f)
		}
		if got := s.summary(); got != (LockRenewals{Count: 3, SlowestMs: 2000, Sheds: 2, MinConcurrency: 1}) {
			t.Errorf("summary %+v", got)
		}
	})
}

// A renewal unanswered TTL/6 past its due time (TTL/3 after the last was
// sent) pauses the write — no chunk starts, the ones in flight run on —
// until it is answered; the first pause is the write's one WARNING.
func TestShedderPausesWhileRenewalOverdue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 6 * time.Second // due 2 s after the last, overdue 1 s later
		core, logs := observer.New(zapcore.DebugLevel)
		s := newShedder(4, ttl, zap.New(core))
		defer s.stop()
		ctx := context.Background()
		s.start(time.Now())
		if _, ok := s.enter(ctx, ctx); !ok {
			t.Fatal("enter refused the first chunk")
		}
		time.Sleep(3*time.Second - time.Nanosecond)
		s.leave()
		if _, ok := s.enter(ctx, ctx); !ok {
			t.Fatal("paused before the renewal was overdue")
		}
		s.leave()
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		admitted := make(chan bool, 1)
		go func() {
			_, ok := s.enter(ctx, ctx)
			admitted <- ok
		}()
		synctest.Wait()
		if len(admitted) != 0 {
			t.Fatal("a chunk started while a renewal was overdue")
		}
		if w := logs.FilterLevelExact(zapcore.WarnLevel).All(); len(w) != 1 || w[0].ContextMap()["signal"] != "a lock renewal overdue" {
			t.Errorf("warnings %v; want one, saying a renewal is overdue", w)
		}
		s.renewed(locking.RenewalStat{Latency: 1500 * time.Millisecond, TTL: ttl}) // answered
		if !<-admitted {
			t.Fatal("the chunk did not start once the renewal was answered")
		}
		s.leave()
		if got := s.summary(); got.Pauses != 1 || got.Count != 1 {
			t.Errorf("summary %+v; want one pause, one renewal", got)
		}
	})
}

// A renewal answered at the very moment it would be overdue does not
// leave the write paused: the timer of a watch that a renewal ended is
// stale, even when it runs after the renewal was taken into account.
func TestShedderOverdueTimerStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 6 * time.Second
		s := newShedder(4, ttl, zap.NewNop())
		defer s.stop()
		s.start(time.Now())
		s.mu.Lock()
		first := s.watched
		s.mu.Unlock()
		time.Sleep(2 * time.Second)
		s.renewed(locking.RenewalStat{Latency: 100 * time.Millisecond, TTL: ttl})
		s.overdue(first) // the first watch's timer, late
		s.mu.Lock()
		admits, pauses := s.policy.admits(), s.policy.stats.Pauses
		s.mu.Unlock()
		if admits != 1 || pauses != 0 {
			t.Errorf("admits %d, %d pauses after a stale timer; want 1, none", admits, pauses)
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
		if _, ok := s.enter(bg, bg); !ok {
			t.Fatal("first enter refused")
		}
		for _, which := range []string{"start", "work"} {
			ctx, cancel := context.WithCancelCause(bg)
			done := make(chan bool, 1)
			go func() {
				var ok bool
				if which == "start" {
					_, ok = s.enter(ctx, bg)
				} else {
					_, ok = s.enter(bg, ctx)
				}
				done <- ok
			}()
			synctest.Wait()
			cancel(errors.New("stop"))
			if <-done {
				t.Errorf("enter admitted a chunk after its %s context ended", which)
			}
		}
		s.leave()
		if _, ok := s.enter(bg, bg); !ok {
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

// heldCommits holds the chunks' commits while the test says so, so that
// the chunks in flight can be counted without racing them.
type heldCommits struct {
	mu      sync.Mutex
	n       int           // commits held now
	gate    chan struct{} // closed: commits pass
	changed chan struct{} // a token when n changed
}

func newHeldCommits() *heldCommits {
	h := &heldCommits{gate: make(chan struct{}), changed: make(chan struct{}, 1)}
	close(h.gate)
	return h
}

// rule is the fault injector's rule: a commit of district documents waits
// at the gate.
func (h *heldCommits) rule(c *commitCall) error {
	if len(c.districts) == 0 {
		return nil
	}
	h.mu.Lock()
	gate := h.gate
	h.n++
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

// hold holds the commits from now on.
func (h *heldCommits) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.gate:
		h.gate = make(chan struct{})
	default: // holding already
	}
}

// open lets the commits held go, and the later ones through.
func (h *heldCommits) open() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.gate:
	default:
		close(h.gate)
	}
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
// once, and more again once they are fast. The chunks' commits are held
// at chosen moments, so the chunks in flight are counted exactly: 8 (the
// concurrency, reached from one as the first chunks commit fast); after
// slow renewals (1.5 s at a 6 s TTL, over TTL/6: each pauses the write
// while overdue, then halves the limit) at most the halved limit, although
// the 8 held commits were let go; 8 again once fast renewals and chunks
// have restored it. One WARNING says when the shedding started, and the
// Result reports it.
func TestWriterShedsChunksWhenRenewalsSlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fl := e.locker()
	slow := &slowRenewals{Backend: fl, keyed: fl}
	commits := newHeldCommits()
	e.f.setRule(commits.rule)
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
		WithLockTTL(6*time.Second), WithConcurrency(8), WithBatchSize(5), WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	type out struct {
		res *Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := w.Write(context.Background(), day, gen(600, 3))
		done <- out{res, err}
	}()
	defer commits.open() // whatever happens, let the write end

	limits := func() []int64 {
		var l []int64
		for _, e := range logs.All() {
			if c, ok := e.ContextMap()["concurrency"].(int64); ok && e.Message != "lock renewed" {
				l = append(l, c)
			}
		}
		return l
	}
	// reached waits for the limit to become n after what was logged so far.
	reached := func(n int64) func() bool {
		from := len(limits())
		return func() bool { return slices.Contains(limits()[min(from, len(limits())):], n) }
	}
	waitFor(t, logged, "the concurrency at 8", reached(8))
	commits.hold()
	waitFor(t, commits.changed, "8 chunk commits in flight", func() bool { return commits.held() == 8 })

	// The next renewal is slow: overdue TTL/6 after it was due, it pauses
	// the write (the one WARNING), and answered, it halves the limit.
	halved := reached(4)
	slow.setDelay(1500 * time.Millisecond)
	waitFor(t, logged, "the halving to 4", halved)
	warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
	if len(warns) != 1 || warns[0].ContextMap()["signal"] != "a lock renewal overdue" {
		t.Errorf("warnings %v; want one, the overdue renewal's", warns)
	}
	// Let the 8 go and hold the next: they start only up to the limit. The
	// next renewal is slow too, and halves the limit again; by then the
	// chunks admitted have long reached their commits.
	again := reached(2)
	commits.open()
	commits.hold()
	waitFor(t, logged, "the next halving", again)
	if n := commits.held(); n < 1 || n > 4 {
		t.Errorf("%d chunk commits in flight after the halving to 4", n)
	}
	// Fast renewals again: chunks grow back to 8, one a round trip.
	back := reached(8)
	slow.setDelay(0)
	commits.open()
	waitFor(t, logged, "the concurrency back at 8", back)
	commits.hold()
	waitFor(t, commits.changed, "8 chunk commits in flight again", func() bool { return commits.held() == 8 })
	commits.open()
	got := <-done
	if got.err != nil || got.res.Outcome != OutcomeComplete {
		t.Fatalf("write: %v", got.err)
	}
	r := got.res.LockRenewals
	if r.Sheds < 2 || r.MinConcurrency > 2 || r.SlowestMs < 1500 || r.Pauses < 2 {
		t.Errorf("result's lockRenewals %+v; want 2 sheds and pauses or more, down to 2 or fewer, the slowest renewal ≥ 1.5 s", r)
	}
	if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 1 {
		t.Errorf("%d warnings; want the one that said shedding started", n)
	}
	checkInvariants(t, got.res)
	t.Logf("%+v in %d ms; limits %v", r, got.res.TotalDurationMs, limits())
}
