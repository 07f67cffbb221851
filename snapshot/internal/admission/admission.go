// Package admission decides when a chunk of a write may start, and paces
// its writes. Every district chunk of a write or repair, and every delete
// chunk of a prune, passes three gates, in this order:
//
//  1. the maintenance hold: while a maintenance notice is in force
//     (snapshot.Maintenance holds the Gate), no chunk starts;
//  2. shedding: no more chunks in flight than the store's answers allow —
//     one at first, fewer again while the lock's renewals or the chunks'
//     commits slow down, none while a renewal is overdue (shedPolicy);
//  3. the write budget: before each attempt, outside the attempt's
//     timeout, the attempt's writes are taken from the Writer's
//     pacing.Budget, and the store's answer goes back to it.
//
// A chunk passes the first two once (Admit, which Ticket.Done ends) and
// the third at every attempt, retries included (Wait, Answered). Chunks in
// flight are never cancelled: the gates only hold back the next ones.
//
// A Gate is one write's, from the lock's acquisition to its release; its
// methods are safe for concurrent use by the write's chunks, its lease's
// heartbeat and the Maintenance.
package admission

import (
	"context"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/pacing"
)

// Metrics records what the budget did: each attempt's wait for it, its
// rate, and the store's push-back. The Writer's telemetry implements it.
type Metrics interface {
	BudgetWaited(ctx context.Context, d time.Duration)
	RateLimit(ctx context.Context, limit float64)
	PushedBack(ctx context.Context, code codes.Code)
}

// Config is what a write's Gate is made of.
type Config struct {
	// Concurrency is the most chunks in flight at once.
	Concurrency int
	// LockTTL is the TTL of the write's lock, whose renewals, due every
	// TTL/3, shedding keeps fast.
	LockTTL time.Duration
	// Budget is the Writer's write budget, shared with its other writes.
	Budget *pacing.Budget
	// Metrics records the budget's waits, rate and push-back; nil records
	// nothing.
	Metrics Metrics
	// Log is the write's logger; nil logs nothing.
	Log *zap.Logger
}

// Gate admits one write's chunks and paces their attempts.
type Gate struct {
	shed *shedder
	pace *pacer
}

// New returns the Gate of a write configured by c.
func New(c Config) *Gate {
	log, m := c.Log, c.Metrics
	if log == nil {
		log = zap.NewNop()
	}
	if m == nil {
		m = noMetrics{}
	}
	return &Gate{shed: newShedder(c.Concurrency, c.LockTTL, log), pace: newPacer(c.Budget, m, log)}
}

// Renewed takes one renewal of the write's lease into account: it is the
// lease's locking.OnRenewal function, and runs on its heartbeat.
func (g *Gate) Renewed(st locking.RenewalStat) { g.shed.renewed(st) }

// Start watches for an overdue renewal of the write's lease (the first is
// due TTL/3 after the lock was acquired by a request sent at sent): no
// chunk starts while one is overdue.
func (g *Gate) Start(sent time.Time) { g.shed.start(sent) }

// Stop ends the watch Start began: the write is over.
func (g *Gate) Stop() { g.shed.stop() }

// Hold starts no chunk until Unhold, whatever shedding admits: a
// maintenance notice. Chunks in flight run on.
func (g *Gate) Hold() { g.shed.hold() }

// Unhold lets chunks start again, as many as shedding admits.
func (g *Gate) Unhold() { g.shed.unhold() }

// InFlight is how many chunks are in flight.
func (g *Gate) InFlight() int { return g.shed.inFlight() }

// Begin notes that a stage of chunks of n writes in all starts; the func
// returned, that it is over. A stage that starts while no other write of
// the budget is under way, with no push-back in force, and whose writes fit
// in one second of the budget takes its writes without waiting: no second
// of it can hold more than the rate (pacing.Budget.Begin). Its writes are
// still counted.
func (g *Gate) Begin(n int) (end func()) { return g.pace.begin(n) }

// Admit is the chunk stage's entry point: it waits until a chunk may
// start — no maintenance hold, fewer chunks in flight than shedding
// admits — and returns the chunk's Ticket, counted in flight until its
// Done. It returns nil, admitting nothing, as soon as start (no chunk
// starts after it) or work (the lease is lost) ends; the chunk then
// records itself as not attempted.
func (g *Gate) Admit(start, work context.Context) *Ticket {
	epoch, ok := g.shed.enter(start, work)
	if !ok {
		return nil
	}
	return &Ticket{shed: g.shed, epoch: epoch, admitted: time.Now()}
}

// Wait takes an attempt's n writes from the budget and returns how long
// that took. It runs before the attempt, outside its timeout (the retry
// policy's gate): a chunk waiting for the budget has not been sent.
func (g *Gate) Wait(ctx context.Context, n int) (time.Duration, error) { return g.pace.wait(ctx, n) }

// Answered tells the budget how the store answered the attempt of n
// writes taken from it at taken (when its Wait began, which may be well
// before it was sent): accepted, or refused for load (RESOURCE_EXHAUSTED,
// ABORTED), which lowers the budget's rate once per wave of attempts.
func (g *Gate) Answered(ctx context.Context, err error, taken time.Time, n int) {
	g.pace.answered(ctx, err, taken, n)
}

// Renewals is what the write's Result reports of its lease's renewals
// and its shedding.
func (g *Gate) Renewals() Renewals { return g.shed.summary() }

// Rate is what the write's Result reports of its pacing.
func (g *Gate) Rate() Rate { return g.pace.report() }

// Ticket is one chunk that Admit admitted.
type Ticket struct {
	shed     *shedder
	epoch    int // of the shedding limit it was admitted under
	admitted time.Time
}

// Done ends the chunk, letting the next one start, and reports how it
// went: committed or not, after its attempts waited budgetWait for the
// budget (Wait's durations, summed). A committed chunk's latency since
// Admit, less that wait — the writer's own, not queueing at the store —
// tells shedding how fast the store answers. A nil Ticket does nothing.
func (t *Ticket) Done(committed bool, budgetWait time.Duration) {
	if t == nil {
		return
	}
	if committed {
		t.shed.committed(time.Since(t.admitted)-budgetWait, t.epoch)
	}
	t.shed.leave()
}

// noMetrics records nothing.
type noMetrics struct{}

func (noMetrics) BudgetWaited(context.Context, time.Duration) {}
func (noMetrics) RateLimit(context.Context, float64)          {}
func (noMetrics) PushedBack(context.Context, codes.Code)      {}
