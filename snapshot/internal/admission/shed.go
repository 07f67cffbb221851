package admission

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/locking"
)

// Renewals is how the renewals of a write's lock went, and what the
// write did to keep them fast: snapshot.LockRenewals but for the loss of
// the lease, field for field, which documents them.
type Renewals struct {
	Count          int
	SlowestMs      int64
	Sheds          int
	MinConcurrency int
	Pauses         int
}

// shedPolicy decides how many chunks a write runs at once, so that the
// store answers the lease's renewals in time. The lock lives in the store
// the chunks load (on the emulator, behind the same queue), and a renewal
// due TTL/3 after the last has until the expiry, 2/3 TTL, to be answered.
//
// Two signals halve the limit (down to one chunk):
//   - a renewal slower than TTL/6: a quarter of that margin gone, the
//     lease still four such latencies from being lost;
//   - a chunk whose commit took more than TTL/6 longer than the fastest
//     chunk of the write: its queueing delay, what the store made it wait
//     beyond its own cost, and so about what a renewal waits too.
//     Renewals come every TTL/3; chunks end all the time, and show a
//     queue as it builds.
//
// And a renewal still unanswered TTL/6 after it was due (the heartbeat
// sends it TTL/3 after the last) pauses the write: no chunk starts until
// it is answered. Chunks in flight are never cancelled.
//
// A chunk answered within TTL/12 of the fastest adds one chunk, up to the
// configured concurrency, as long as the last renewal was answered within
// TTL/12 too; between the thresholds the limit holds, so that it does not
// swing with every answer. The limit starts at one chunk and grows by one
// a round trip: ten writers that start together at 16 chunks each queue
// half a minute of work on the emulator before the first renewal is due
// (issue 25); starting at one, they find out at their first chunks.
// Growing faster (doubling per round trip, TCP's slow start) overshot: all
// ten grew on the fast answers of the first chunks, together. A signal
// about a chunk admitted, or a renewal sent, before the last change of the
// limit is stale, and ignored: one change per round trip. A renewal that
// ended in the loss of the lease changes nothing: no chunk starts after
// it anyway.
//
// It is pure logic: the shedder applies it.
type shedPolicy struct {
	max, limit int
	ttl        time.Duration
	// base is the fastest chunk so far: a chunk's own cost, without queueing.
	base time.Duration
	// lastRenewal is the latest renewal's latency (0 before the first).
	lastRenewal time.Duration
	// epoch counts the changes a chunk must postdate to count: every
	// halving, and every growth once the write has shed. cutAt is when
	// the last halving was made.
	epoch int
	cutAt time.Time
	// paused: a renewal is overdue; no chunk starts until it is answered.
	paused bool
	stats  Renewals
}

func newShedPolicy(concurrency int, ttl time.Duration) shedPolicy {
	return shedPolicy{max: concurrency, limit: 1, ttl: ttl, stats: Renewals{MinConcurrency: concurrency}}
}

// slow and fast are the latencies past which a renewal or a chunk's
// queueing delay halves the limit, and within which it may grow.
func (p *shedPolicy) slow() time.Duration { return p.ttl / 6 }
func (p *shedPolicy) fast() time.Duration { return p.ttl / 12 }

// renewal takes a renewal that ended at now into account and returns the
// limit from now on, and whether this renewal halved it.
func (p *shedPolicy) renewal(s locking.RenewalStat, now time.Time) (limit int, cut bool) {
	if s.Err != nil {
		return p.limit, false
	}
	p.paused = false
	p.stats.Count++
	p.stats.SlowestMs = max(p.stats.SlowestMs, s.Latency.Milliseconds())
	p.lastRenewal = s.Latency
	if s.Latency > p.slow() && !now.Add(-s.Latency).Before(p.cutAt) {
		return p.limit, p.cut(now)
	}
	return p.limit, false
}

// chunk takes into account a chunk that was admitted in epoch, committed
// after latency and ended at now; it returns the limit from now on, and
// whether this chunk halved it.
func (p *shedPolicy) chunk(latency time.Duration, epoch int, now time.Time) (limit int, cut bool) {
	if p.base == 0 || latency < p.base {
		p.base = latency
	}
	if epoch != p.epoch {
		return p.limit, false // admitted before the last change: stale
	}
	switch queued := latency - p.base; {
	case queued > p.slow():
		return p.limit, p.cut(now)
	case queued <= p.fast() && p.lastRenewal <= p.fast() && p.limit < p.max:
		p.limit++
		p.epoch++
	}
	return p.limit, false
}

// overdue pauses the write: the renewal due has gone unanswered for
// TTL/6. It reports whether the write was not paused already.
func (p *shedPolicy) overdue() bool {
	if p.paused {
		return false
	}
	p.paused = true
	p.stats.Pauses++
	return true
}

// admits is how many chunks may be in flight now.
func (p *shedPolicy) admits() int {
	if p.paused {
		return 0
	}
	return p.limit
}

// cut halves the limit, if there is anything to halve, and starts a new
// epoch; it reports whether it did.
func (p *shedPolicy) cut(now time.Time) bool {
	if p.limit <= 1 {
		return false
	}
	p.limit = max(1, p.limit/2)
	p.epoch++
	p.cutAt = now
	p.stats.Sheds++
	p.stats.MinConcurrency = min(p.stats.MinConcurrency, p.limit)
	return true
}

// shedder applies shedPolicy to one write: it learns of every renewal of
// the write's lease (renewed, as locking.OnRenewal's function) and of
// every chunk committed (committed), watches for a renewal overdue (start,
// stop), and admits chunks (enter, leave) while fewer than the policy
// allows are in flight. Chunks already in flight when the limit drops run
// on: shedding only holds back the next ones.
type shedder struct {
	log *zap.Logger

	mu      sync.Mutex
	policy  shedPolicy
	busy    int           // chunks in flight
	wake    chan struct{} // closed, and replaced, when a chunk may start
	warned  bool
	timer   *time.Timer // fires when the next renewal is overdue
	watched int         // counts the watches: a timer of an earlier one is stale
	stopped bool
	// held: a maintenance notice is in force (snapshot.Maintenance); no
	// chunk starts until it ends, whatever the policy admits.
	held bool
}

func newShedder(concurrency int, ttl time.Duration, log *zap.Logger) *shedder {
	return &shedder{log: log, policy: newShedPolicy(concurrency, ttl), wake: make(chan struct{})}
}

// start watches for the first renewal, due TTL/3 after the lock was
// acquired by a request sent at sent.
func (s *shedder) start(sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watch(sent)
}

// stop ends the watch: the write is over.
func (s *shedder) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	if s.timer != nil {
		s.timer.Stop()
	}
}

// watch arms the timer for the renewal that the heartbeat sends TTL/3
// after the one sent at sent: it is overdue TTL/6 after that. Callers
// hold s.mu.
func (s *shedder) watch(sent time.Time) {
	if s.stopped {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	s.watched++
	watch := s.watched
	s.timer = time.AfterFunc(time.Until(sent.Add(s.policy.ttl/3+s.policy.slow())), func() { s.overdue(watch) })
}

// overdue pauses the write while the renewal due is unanswered, unless
// the watch that armed it is over (a renewal came in as it fired).
func (s *shedder) overdue(watch int) {
	s.mu.Lock()
	if s.stopped || watch != s.watched || !s.policy.overdue() {
		s.mu.Unlock()
		return
	}
	first := !s.warned
	s.warned = true
	s.mu.Unlock()
	fields := []zap.Field{zap.String("signal", "a lock renewal overdue"), zap.Duration("lockTTL", s.policy.ttl),
		zap.Int("concurrency", 0), zap.Int("configuredConcurrency", s.policy.max)}
	if first {
		s.log.Warn("the store is slow to answer: a lock renewal is overdue; starting no chunk until it is answered", fields...)
		return
	}
	s.log.Debug("a lock renewal is overdue; starting no chunk until it is answered", fields...)
}

// renewed takes one renewal of the write's lease into account. It runs on
// the lease's heartbeat goroutine, so it only logs and signals.
func (s *shedder) renewed(st locking.RenewalStat) {
	now := time.Now()
	s.mu.Lock()
	before := s.policy.admits()
	limit, cut := s.policy.renewal(st, now)
	if st.Err != nil {
		s.stopped = true // no renewal follows
		if s.timer != nil {
			s.timer.Stop()
		}
	} else {
		s.watch(now.Add(-st.Latency))
	}
	if s.policy.admits() > before {
		s.signal()
	}
	s.mu.Unlock()
	fields := []zap.Field{zap.Duration("renewalLatency", st.Latency), zap.Duration("leaseLeft", st.Left)}
	if limit == before {
		s.log.Debug("lock renewed", append(fields, zap.Int("concurrency", limit))...)
		return
	}
	s.changed("a lock renewal", before, limit, cut, fields)
}

// committed takes into account a chunk that enter admitted in epoch and
// that committed after latency.
func (s *shedder) committed(latency time.Duration, epoch int) {
	s.mu.Lock()
	before := s.policy.admits()
	s.policy.chunk(latency, epoch, time.Now())
	limit := s.policy.admits()
	cut := limit < before
	renewal, base := s.policy.lastRenewal, s.policy.base
	if limit > before {
		s.signal()
	}
	s.mu.Unlock()
	fields := []zap.Field{zap.Duration("chunkLatency", latency), zap.Duration("fastestChunk", base), zap.Duration("renewalLatency", renewal)}
	s.changed("a chunk commit", before, limit, cut, fields)
}

// changed logs a change of the limit that signal made: one WARNING when
// the write first sheds, DEBUG otherwise. The fields never name the lock's
// key or lockId.
func (s *shedder) changed(signal string, before, limit int, cut bool, fields []zap.Field) {
	if limit == before {
		return
	}
	s.mu.Lock()
	first := cut && !s.warned
	s.warned = s.warned || cut
	s.mu.Unlock()
	fields = append(fields, zap.String("signal", signal), zap.Duration("lockTTL", s.policy.ttl),
		zap.Int("concurrency", limit), zap.Int("configuredConcurrency", s.policy.max))
	if first {
		s.log.Warn("the store is slow to answer: running fewer chunks at once, so that the lock's renewals are answered in time", fields...)
		return
	}
	s.log.Debug("chunks at once changed", fields...)
}

// signal wakes the chunks waiting to start. Callers hold s.mu.
func (s *shedder) signal() {
	close(s.wake)
	s.wake = make(chan struct{})
}

// enter waits until a chunk may start (fewer than the limit in flight) and
// reports true, with the chunk counted in flight until leave, and the
// epoch to report its commit in (committed); or it returns false,
// counting nothing, as soon as start or ctx ends (the chunk then records
// itself as not attempted).
func (s *shedder) enter(start, ctx context.Context) (epoch int, ok bool) {
	for {
		s.mu.Lock()
		if !s.held && s.busy < s.policy.admits() {
			s.busy++
			epoch := s.policy.epoch
			s.mu.Unlock()
			return epoch, true
		}
		wake := s.wake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-start.Done():
			return 0, false
		case <-ctx.Done():
			return 0, false
		}
	}
}

// hold stops chunks from starting until unhold: a maintenance notice.
// Chunks in flight run on.
func (s *shedder) hold() {
	s.mu.Lock()
	s.held = true
	s.mu.Unlock()
}

// unhold lets chunks start again, as many as the policy admits.
func (s *shedder) unhold() {
	s.mu.Lock()
	s.held = false
	s.signal()
	s.mu.Unlock()
}

// inFlight is how many chunks are in flight.
func (s *shedder) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy
}

// leave ends a chunk that enter admitted.
func (s *shedder) leave() {
	s.mu.Lock()
	s.busy--
	s.signal()
	s.mu.Unlock()
}

// summary is what the write's Result reports of its renewals.
func (s *shedder) summary() Renewals {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.policy.stats
}
