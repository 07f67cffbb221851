package snapshot

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/snapshot/internal/admission"
)

// DefaultMaintenanceWait bounds a maintenance notice that nothing ends
// (Maintenance.Resume): Cloud Run warns a job task 10 s before a
// maintenance migration freezes it, and a notice with no freeze behind it
// must not stall a write for ever. 10 s of notice, and as long again for
// a freeze that comes late; a process that is frozen meanwhile resumes at
// SIGCONT, whichever of the two ends the notice first.
const DefaultMaintenanceWait = 20 * time.Second

// Maintenance carries notices that the process is about to be paused —
// frozen for a maintenance migration, or suspended at a terminal — to
// every write, repair and prune in progress of the Writers given it
// (WithMaintenance), and the end of the pause.
//
// On a notice (Notice) each of them starts no new chunk (chunks in flight
// commit as usual) and renews its lock at once (locking.Lease.Renew), so
// that a pause shorter than the lock's TTL costs it nothing. When the pause
// ends (Resume, or the wait given to NewMaintenance passing first) each
// renews its lock again, to confirm it still holds it, before its next
// chunk starts; one that lost its lock meanwhile ends as on any lost lease
// (ErrLockLost, or ErrFencedOut when a newer writer took the snapshot
// over), its manifest recording what was written. A write that takes its
// lock while a notice is in force starts no chunk until it ends either.
//
// A Maintenance is safe for concurrent use, and is used by any number of
// Writers at once: a process has one, fed by its signal handling. The zero
// value is ready to use, with DefaultMaintenanceWait.
type Maintenance struct {
	wait time.Duration

	mu     sync.Mutex
	writes map[*pausable]struct{} // the writes holding their lock
	paused bool                   // a notice is in force
	notice int                    // counts the notices, so that a stale wait ends nothing
	since  time.Time              // the first notice of the pause in force
	timer  *time.Timer            // ends the pause after wait
}

// NewMaintenance returns a Maintenance whose notices end after wait unless
// Resume ends them first; wait ≤ 0 means DefaultMaintenanceWait.
func NewMaintenance(wait time.Duration) *Maintenance {
	return &Maintenance{wait: wait}
}

// Wait is how long a notice lasts unless Resume ends it first.
func (m *Maintenance) Wait() time.Duration {
	if m.wait <= 0 {
		return DefaultMaintenanceWait
	}
	return m.wait
}

// Paused reports whether a notice is in force.
func (m *Maintenance) Paused() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.paused
}

// pausable is one write (or repair, or prune) holding its lock, as a
// Maintenance sees it.
type pausable struct {
	id    string
	lease *locking.Lease
	gate  *admission.Gate
	// log is the job's logger when it joined: the job's own field changes
	// as it goes (the fence is added), on the job's goroutine.
	log *zap.Logger
}

// The ways a pause ends, as its log line names them (resumedBy).
const (
	resumedByResume = "resume"
	resumedByWait   = "wait over"
)

// Notice says that the process is about to be paused. From its call on,
// no write in progress starts a chunk until the pause ends (Resume, or the
// wait); each renews its lock at once. A notice while one is in force
// renews again and restarts the wait.
//
// Notice returns once every write in progress has renewed its lock: nil,
// or the errors of those whose lease was lost (matching ErrLockLost and
// locking.ErrLeaseLost; their writes end as on any lost lease), joined. A
// write that ended meanwhile is no error. If ctx ends first, Notice
// returns its cause, wrapped; the renewals go on, each bounded by its
// lock's expiry, and the pause holds whatever ctx does.
func (m *Maintenance) Notice(ctx context.Context) error {
	m.mu.Lock()
	m.notice++
	n := m.notice
	if !m.paused {
		m.paused, m.since = true, time.Now()
	}
	if m.timer != nil {
		m.timer.Stop()
	}
	m.timer = time.AfterFunc(m.Wait(), func() { _ = m.end(context.Background(), n, resumedByWait) })
	ps := m.held()
	m.mu.Unlock()
	return each(ctx, ps, "renewing the lock for a maintenance notice", func(p *pausable) error {
		busy := p.gate.InFlight()
		p.log.Info("maintenance notice: renewing the lock now; no chunk starts until the pause ends",
			zap.String("fence", p.lease.Fence()), zap.Int("chunksInFlight", busy), zap.Duration("maintenanceWait", m.Wait()))
		t0 := time.Now()
		if err := p.renew(); err != nil {
			return err
		}
		p.log.Info("lock renewed for the maintenance notice", zap.Duration("renewalLatency", time.Since(t0)))
		return nil
	})
}

// Resume says that the pause is over (the process was resumed). Every
// write held by a notice renews its lock, and starts chunks again once the
// store has answered; one whose lease was lost meanwhile starts none, and
// ends as on any lost lease. Resume returns once each has its answer, with
// the errors of the leases lost joined (as Notice's), or ctx's cause,
// wrapped, if ctx ends first (the confirmations go on). Without a notice
// in force it does nothing.
func (m *Maintenance) Resume(ctx context.Context) error {
	return m.end(ctx, 0, resumedByResume)
}

// end ends the pause in force: any, for notice 0 (Resume); for the wait of
// notice n, only if no later notice came.
func (m *Maintenance) end(ctx context.Context, n int, by string) error {
	m.mu.Lock()
	if !m.paused || (n != 0 && n != m.notice) {
		m.mu.Unlock()
		return nil
	}
	m.paused = false
	m.timer.Stop()
	paused := time.Since(m.since)
	ps := m.held()
	m.mu.Unlock()
	return each(ctx, ps, "confirming the lock after a maintenance pause", func(p *pausable) error {
		t0 := time.Now()
		if err := p.renew(); err != nil {
			// No chunk starts: the lost lease ends the write.
			p.log.Warn("lost the lock during the maintenance pause; no chunk starts", zap.Error(err))
			return err
		}
		m.mu.Lock()
		again := m.paused // a new notice since: it holds the write
		if !again {
			p.gate.Unhold()
		}
		m.mu.Unlock()
		p.log.Info("maintenance pause over: lock confirmed; chunks start again", zap.String("resumedBy", by),
			zap.Duration("paused", paused), zap.Duration("renewalLatency", time.Since(t0)), zap.Bool("noticedAgain", again))
		return nil
	})
}

// held holds every write in progress (no chunk starts) and returns them.
// Callers hold m.mu, so that a write joining, or a pause ending, is
// ordered with it.
func (m *Maintenance) held() []*pausable {
	ps := make([]*pausable, 0, len(m.writes))
	for p := range m.writes {
		if m.paused {
			p.gate.Hold()
		}
		ps = append(ps, p)
	}
	return ps
}

// join makes a job of snapshot id that holds its lock subject to the notices, held at
// once if one is in force; leave ends that, before the lock is released.
// A nil Maintenance does nothing.
func (m *Maintenance) join(id string, j *job) (leave func()) {
	if m == nil {
		return func() {}
	}
	p := &pausable{id: id, lease: j.lease, gate: j.adm, log: j.log}
	m.mu.Lock()
	if m.writes == nil {
		m.writes = map[*pausable]struct{}{}
	}
	m.writes[p] = struct{}{}
	paused := m.paused
	if paused {
		p.gate.Hold()
	}
	m.mu.Unlock()
	if paused {
		p.log.Info("a maintenance notice is in force: no chunk starts until the pause ends")
	}
	return func() {
		m.mu.Lock()
		delete(m.writes, p)
		m.mu.Unlock()
	}
}

// renew renews p's lock and waits for the answer, however long its lease
// gives it: the caller's context bounds only the caller's wait (each). A
// lease released meanwhile (the write ended) is no error.
func (p *pausable) renew() error {
	err := p.lease.Renew(context.Background())
	switch {
	case err == nil, errors.Is(err, locking.ErrReleased):
		return nil
	}
	return newError(p.id, ErrLockLost, err)
}

// each runs fn for every write at once and waits for them all, or for
// ctx: the errors joined, or ctx's cause wrapped with what was waited for.
func each(ctx context.Context, ps []*pausable, what string, fn func(*pausable) error) error {
	errs := make(chan error, len(ps))
	for _, p := range ps {
		go func() { errs <- fn(p) }()
	}
	var all []error
	for range ps {
		select {
		case err := <-errs:
			all = append(all, err)
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, context.Cause(ctx))
		}
	}
	return errors.Join(all...)
}
