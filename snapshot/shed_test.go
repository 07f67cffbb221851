package snapshot

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/snapwriter/snapwriter/locking"
)

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
