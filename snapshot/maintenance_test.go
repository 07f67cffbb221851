package snapshot

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
)

// A zero Maintenance is ready, with the default wait; a nil one (no
// WithMaintenance) holds nothing.
func TestMaintenanceZeroValue(t *testing.T) {
	var m Maintenance
	if m.Wait() != DefaultMaintenanceWait || NewMaintenance(0).Wait() != DefaultMaintenanceWait || m.Paused() {
		t.Errorf("zero: Wait() %s, Paused() %v; NewMaintenance(0).Wait() %s", m.Wait(), m.Paused(), NewMaintenance(0).Wait())
	}
	if err := m.Resume(context.Background()); err != nil {
		t.Errorf("Resume without a notice: %v", err)
	}
	var none *Maintenance
	none.join(day, &job{})()
}

// timedRenewals is the Firestore lock backend, noting when each extension
// of the lock was answered.
type timedRenewals struct {
	*firestorelock.Backend
	mu       sync.Mutex
	answered []time.Time
}

func (r *timedRenewals) ExtendKey(ctx context.Context, key, lockID string, ttl time.Duration) (locking.ExtendResult, error) {
	res, err := r.Backend.ExtendKey(ctx, key, lockID, ttl)
	if err == nil && res.OK {
		r.mu.Lock()
		r.answered = append(r.answered, time.Now())
		r.mu.Unlock()
	}
	return res, err
}

// between counts the extensions answered in [from, to].
func (r *timedRenewals) between(from, to time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, at := range r.answered {
		if !at.Before(from) && !at.After(to) {
			n++
		}
	}
	return n
}

// pausedWrite is a write of 100 districts in ten chunks, one at a time,
// under a Maintenance whose notice comes while the third chunk's commit is
// held: its fields say when, and what the write logged.
type pausedWrite struct {
	e        *env
	renewals *timedRenewals
	logs     *observer.ObservedLogs
	m        *Maintenance
	noticed  time.Time // just before Notice was called
	release  chan struct{}
	done     chan error
	res      *Result
}

// startPausedWrite starts the write and returns once Notice has returned
// (nil) with the third chunk's commit still held; release lets it go.
func startPausedWrite(t *testing.T, wait time.Duration, opts ...Option) *pausedWrite {
	t.Helper()
	e := newEnv(t)
	p := &pausedWrite{e: e, m: NewMaintenance(wait), release: make(chan struct{}), done: make(chan error, 1)}
	var chunks atomic.Int32
	third := make(chan struct{})
	e.f.setRule(func(c *commitCall) error {
		if len(c.districts) > 0 && chunks.Add(1) == 3 {
			close(third)
			<-p.release
		}
		return nil
	})
	fl := e.locker()
	p.renewals = &timedRenewals{Backend: fl}
	core, logs := observer.New(zapcore.InfoLevel)
	p.logs = logs
	base := []Option{WithAPIClient(e.api), WithRetryPolicy(fastPolicy()), WithLockWait(0), WithBatchSize(10), WithConcurrency(1),
		WithMaintenance(p.m), WithLogger(zap.New(core))}
	w, err := NewWriter(e.client, p.renewals, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		var err error
		p.res, err = w.Write(context.Background(), day, gen(100, 3))
		p.done <- err
	}()
	select {
	case <-third:
	case err := <-p.done:
		t.Fatalf("the write ended before its third chunk: %v", err)
	}
	p.noticed = time.Now()
	if err := p.m.Notice(context.Background()); err != nil {
		t.Fatalf("Notice: %v", err)
	}
	if !p.m.Paused() || p.m.Wait() != wait {
		t.Errorf("after Notice: Paused() %v, Wait() %s; want true, %s", p.m.Paused(), p.m.Wait(), wait)
	}
	if n := p.renewals.between(p.noticed, time.Now()); n != 1 {
		t.Errorf("%d renewals answered during Notice; want 1, at once", n)
	}
	notice := logs.FilterMessageSnippet("maintenance notice: renewing the lock now").All()
	if len(notice) != 1 || notice[0].ContextMap()["chunksInFlight"] != int64(1) || notice[0].ContextMap()["maintenanceWait"] != wait {
		t.Errorf("notice log lines %v; want one, with 1 chunk in flight and the wait", notice)
	}
	if logs.FilterMessage("lock renewed for the maintenance notice").Len() != 1 {
		t.Error("no log line says the lock was renewed for the notice")
	}
	return p
}

// chunkStarts are the start times of the chunk commits (district
// documents) after the first n.
func (p *pausedWrite) chunkStarts(n int) []time.Time {
	var at []time.Time
	for _, c := range p.e.f.commits() {
		if len(c.districts) > 0 {
			at = append(at, c.start)
		}
	}
	return at[min(n, len(at)):]
}

// recorded waits until the write's recorder has recorded n districts in
// the root: an event after their chunks committed, and after the next
// chunk would have started had nothing held it (the recorder records at
// most once a second).
func (p *pausedWrite) recorded(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		for _, c := range p.e.f.commits() {
			if c.root && len(c.recorded) >= n && !c.end.IsZero() && c.err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %d districts to be recorded", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A maintenance notice holds the write's chunks — the one in flight
// commits, none starts — until Resume; Resume renews the lock before the
// next chunk starts, and the write completes.
func TestMaintenanceNoticeHoldsChunksUntilResume(t *testing.T) {
	t.Parallel()
	p := startPausedWrite(t, time.Minute)
	close(p.release)
	p.recorded(t, 30)
	resumed := time.Now()
	if err := p.m.Resume(context.Background()); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if p.m.Paused() {
		t.Error("Paused() is true after Resume")
	}
	confirmed := time.Now()
	if err := <-p.done; err != nil || p.res.Outcome != OutcomeComplete || p.res.DistrictsWritten != 100 {
		t.Fatalf("write: %v, %s; want complete", err, brief(p.res))
	}
	starts := p.chunkStarts(3)
	if len(starts) != 7 {
		t.Fatalf("%d chunk commits after the third; want 7", len(starts))
	}
	if starts[0].Before(resumed) {
		t.Errorf("the fourth chunk started %s before Resume", resumed.Sub(starts[0]))
	}
	if n := p.renewals.between(resumed, starts[0]); n < 1 {
		t.Errorf("no renewal answered between Resume and the next chunk's start")
	}
	over := p.logs.FilterMessage("maintenance pause over: lock confirmed; chunks start again").All()
	if len(over) != 1 || over[0].ContextMap()["resumedBy"] != resumedByResume || over[0].Time.After(confirmed) {
		t.Errorf("pause-over log lines %v; want one, resumed by Resume, before Resume returned", over)
	}
	checkInvariants(t, p.res)
}

// A notice that no Resume ends holds the chunks for the Maintenance's
// wait, no longer: then the lock is confirmed and the write completes.
func TestMaintenanceNoticeEndsAfterItsWait(t *testing.T) {
	t.Parallel()
	const wait = 1500 * time.Millisecond
	p := startPausedWrite(t, wait)
	close(p.release)
	if err := <-p.done; err != nil || p.res.Outcome != OutcomeComplete {
		t.Fatalf("write: %v, %s; want complete", err, brief(p.res))
	}
	if p.m.Paused() {
		t.Error("still paused after the wait")
	}
	over := p.logs.FilterMessage("maintenance pause over: lock confirmed; chunks start again").All()
	if len(over) != 1 || over[0].ContextMap()["resumedBy"] != resumedByWait {
		t.Fatalf("pause-over log lines %v; want one, resumed by the wait", over)
	}
	starts := p.chunkStarts(3)
	if len(starts) != 7 {
		t.Fatalf("%d chunk commits after the third; want 7", len(starts))
	}
	if held := starts[0].Sub(p.noticed); held < wait {
		t.Errorf("the fourth chunk started %s after the notice; want the wait, %s, at least", held, wait)
	}
	if n := p.renewals.between(p.noticed.Add(wait), starts[0]); n < 1 {
		t.Error("no renewal answered between the wait's end and the next chunk's start")
	}
}

// A lock lost during the pause (here deleted, as an expired lock cleaned
// up is) is found by Resume's confirmation: no chunk starts after the
// notice, Resume reports the loss, and the write ends as on any lost
// lease: partial, the manifest recording the three chunks committed.
func TestMaintenanceLockLostDuringPause(t *testing.T) {
	t.Parallel()
	p := startPausedWrite(t, time.Minute)
	close(p.release)
	p.recorded(t, 30)
	p.e.deleteLock(t)
	err := p.m.Resume(context.Background())
	if !errors.Is(err, ErrLockLost) || !errors.Is(err, locking.ErrLeaseLost) {
		t.Errorf("Resume: %v; want ErrLockLost wrapping locking.ErrLeaseLost", err)
	}
	werr := <-p.done
	if !errors.Is(werr, ErrPartial) || !errors.Is(werr, ErrLockLost) {
		t.Fatalf("write: %v; want ErrPartial and ErrLockLost", werr)
	}
	if p.res.DistrictsWritten != 30 || len(p.e.stored(day)) != 30 {
		t.Errorf("%d districts written, %d stored; want the three chunks before the notice, 30", p.res.DistrictsWritten, len(p.e.stored(day)))
	}
	if starts := p.chunkStarts(3); len(starts) != 0 {
		t.Errorf("%d chunks started after the notice", len(starts))
	}
	if p.logs.FilterMessageSnippet("lost the lock during the maintenance pause").Len() != 1 {
		t.Error("no log line says the lock was lost during the pause")
	}
	checkInvariants(t, p.res)
}
