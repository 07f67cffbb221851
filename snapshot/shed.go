package snapshot

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/locking"
)

// LockRenewals is how the renewals of a write's lock went, and what the
// write did about slow ones (see WithConcurrency).
type LockRenewals struct {
	// Count is how many renewals succeeded.
	Count int `json:"count"`
	// SlowestMs is the latency of the slowest of them, retries included.
	SlowestMs int64 `json:"slowestMs"`
	// Sheds counts the times a slow renewal made the write run fewer
	// chunks at once.
	Sheds int `json:"sheds"`
	// MinConcurrency is the fewest chunks the write allowed in flight:
	// the configured concurrency unless it shed.
	MinConcurrency int `json:"minConcurrency"`
}

// shedPolicy decides how many chunks a write runs at once from the
// latency of its lock's renewals. A renewal is due TTL/3 after the last
// was sent, and has until the lock's expiry, 2/3 TTL, to be answered. The
// store answering the renewals is the one the chunks load, so a renewal
// slower than TTL/6 (a quarter of that margin gone) halves the chunks in
// flight, down to one, while the lease is still four times the latency
// away from being lost; a renewal answered within TTL/12 lets them grow
// back by half (at least one) a renewal, up to the configured concurrency.
// Between the two the concurrency holds, so that it does not swing with
// every renewal. A renewal that ended in the loss of the lease changes
// nothing: the write stops starting chunks then anyway.
//
// It is pure logic: the shedder applies it.
type shedPolicy struct {
	max, limit int
	ttl        time.Duration
	stats      LockRenewals
}

func newShedPolicy(concurrency int, ttl time.Duration) shedPolicy {
	return shedPolicy{max: concurrency, limit: concurrency, ttl: ttl,
		stats: LockRenewals{MinConcurrency: concurrency}}
}

// slow and fast are the latencies past which a renewal cuts the
// concurrency, and within which it restores it.
func (p *shedPolicy) slow() time.Duration { return p.ttl / 6 }
func (p *shedPolicy) fast() time.Duration { return p.ttl / 12 }

// observe takes one renewal into account and returns the concurrency from
// now on, and whether this renewal cut it.
func (p *shedPolicy) observe(s locking.RenewalStat) (limit int, cut bool) {
	if s.Err != nil {
		return p.limit, false
	}
	p.stats.Count++
	p.stats.SlowestMs = max(p.stats.SlowestMs, s.Latency.Milliseconds())
	switch {
	case s.Latency > p.slow() && p.limit > 1:
		p.limit = max(1, p.limit/2)
		p.stats.Sheds++
		p.stats.MinConcurrency = min(p.stats.MinConcurrency, p.limit)
		return p.limit, true
	case s.Latency <= p.fast():
		p.limit = min(p.max, p.limit+max(1, p.limit/2))
	}
	return p.limit, false
}

// shedder applies shedPolicy to one write: it learns of every renewal of
// the write's lease (renewed, as locking.OnRenewal's function) and admits
// chunks (enter, leave) while fewer than the policy's limit are in
// flight. Chunks already in flight when the limit drops run on: shedding
// only holds back the next ones.
type shedder struct {
	log *zap.Logger

	mu     sync.Mutex
	policy shedPolicy
	busy   int           // chunks in flight
	wake   chan struct{} // closed, and replaced, when a chunk may start
	warned bool
}

func newShedder(concurrency int, ttl time.Duration, log *zap.Logger) *shedder {
	return &shedder{log: log, policy: newShedPolicy(concurrency, ttl), wake: make(chan struct{})}
}

// renewed takes one renewal of the write's lease into account. It runs on
// the lease's heartbeat goroutine, so it only logs and signals.
func (s *shedder) renewed(st locking.RenewalStat) {
	s.mu.Lock()
	before := s.policy.limit
	limit, cut := s.policy.observe(st)
	first := cut && !s.warned
	s.warned = s.warned || cut
	if limit > before {
		s.signal()
	}
	s.mu.Unlock()
	fields := []zap.Field{zap.Duration("renewalLatency", st.Latency), zap.Duration("lockTTL", st.TTL),
		zap.Duration("leaseLeft", st.Left), zap.Int("concurrency", limit), zap.Int("configuredConcurrency", s.policy.max)}
	switch {
	case first:
		s.log.Warn("the lock's renewals are slow: running fewer chunks at once, so that the lock is not lost", fields...)
	case limit != before:
		s.log.Debug("concurrency changed with the lock's renewal latency", fields...)
	}
}

// signal wakes the chunks waiting to start. Callers hold s.mu.
func (s *shedder) signal() {
	close(s.wake)
	s.wake = make(chan struct{})
}

// enter waits until a chunk may start (fewer than the limit in flight) and
// reports true, with the chunk counted in flight until leave; or it
// returns false, counting nothing, as soon as start or ctx ends (the
// chunk then records itself as not attempted).
func (s *shedder) enter(start, ctx context.Context) bool {
	for {
		s.mu.Lock()
		if s.busy < s.policy.limit {
			s.busy++
			s.mu.Unlock()
			return true
		}
		wake := s.wake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-start.Done():
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// leave ends a chunk that enter admitted.
func (s *shedder) leave() {
	s.mu.Lock()
	s.busy--
	s.signal()
	s.mu.Unlock()
}

// summary is what the write's Result reports of its renewals.
func (s *shedder) summary() LockRenewals {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.policy.stats
}
