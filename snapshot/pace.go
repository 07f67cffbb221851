package snapshot

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/pacing"
)

// A snapshot's district documents are a new, lexicographically dense key
// range every day, which Firestore asks writers to ramp up to: at most 500
// writes a second at first, 50 % more every 5 minutes. Every chunk attempt
// (retries included) and every prune delete chunk first takes its writes
// from the Writer's budget (WithWriteBudget), which all the Writer's
// writes share; RESOURCE_EXHAUSTED and ABORTED answers to a chunk lower
// the budget's rate, and accepted chunks raise it again (package pacing).
// The root transaction, the progress records, the finish and the lock's
// renewals take nothing from it: they write single documents, at most
// about once a second each, and must not queue behind district chunks.

// WithWriteBudget sets the budget the Writer's district chunks take their
// writes from (default: pacing.DefaultRamp, for one writer, a budget of
// its own). Give one Budget to every Writer of a process that writes the
// same collection, and divide the ramp among the processes that write it
// at once (pacing.New's share), so that together they stay within it.
func WithWriteBudget(b *pacing.Budget) Option { return func(c *config) { c.budget = b } }

// WriteRate is how a write paced its district writes, and how the store
// answered them.
type WriteRate struct {
	// LimitPerSec is the budget's rate, in document writes a second, when
	// the write ended; MinLimitPerSec the lowest it was during the write.
	LimitPerSec    float64 `json:"limitPerSec"`
	MinLimitPerSec float64 `json:"minLimitPerSec"`
	// Share is the number of writers the ramp is divided among.
	Share int `json:"share"`
	// WaitedMs is the time the write's chunks waited for budget, summed
	// over the chunks in flight.
	WaitedMs int64 `json:"waitedMs"`
	// ResourceExhausted and Aborted count the chunk commits the store
	// refused with RESOURCE_EXHAUSTED and ABORTED; Slowdowns, the times
	// those answers lowered the rate.
	ResourceExhausted int `json:"resourceExhausted"`
	Aborted           int `json:"aborted"`
	Slowdowns         int `json:"slowdowns"`
}

// pacer is a job's use of its Writer's budget: it waits for the budget
// before each chunk attempt, tells the budget the store's answers, and
// counts what this job met (the budget is shared by the Writer's jobs).
type pacer struct {
	b   *pacing.Budget
	tel *telemetry
	log *zap.Logger

	waited    atomic.Int64 // ns
	whole     atomic.Bool  // the write takes its writes without waiting (pacing.Budget.Begin)
	exhausted atomic.Int32
	aborted   atomic.Int32
	cuts      atomic.Int32
	warned    atomic.Bool

	mu       sync.Mutex
	minLimit float64
}

func newPacer(b *pacing.Budget, tel *telemetry, log *zap.Logger) *pacer {
	return &pacer{b: b, tel: tel, log: log, minLimit: b.Limit()}
}

// begin notes that the job's chunks of n writes in all start; the func
// returned, that they are over (pacing.Budget.Begin). A write that fits
// in one second of the budget, alone, takes its writes without waiting.
func (p *pacer) begin(n int) (end func()) {
	end, whole := p.b.Begin(n)
	p.whole.Store(whole)
	return end
}

// wait takes n writes from the budget before a chunk attempt, and
// returns how long that took.
func (p *pacer) wait(ctx context.Context, n int) (time.Duration, error) {
	var d time.Duration
	var err error
	if p.whole.Load() {
		p.b.Take(n)
	} else {
		d, err = p.b.Wait(ctx, n)
	}
	p.waited.Add(int64(d))
	p.tel.budgetWaited(ctx, d)
	p.observe(ctx)
	return d, err
}

// answered tells the budget how the store answered the attempt of n
// writes sent at sent: accepted, or refused for load.
func (p *pacer) answered(ctx context.Context, err error, sent time.Time, n int) {
	code := status.Code(err)
	switch code {
	case codes.OK:
		p.b.Accepted(n)
		p.observe(ctx)
		return
	case codes.ResourceExhausted:
		p.exhausted.Add(1)
	case codes.Aborted:
		p.aborted.Add(1)
	default:
		return
	}
	p.tel.pushedBack(ctx, code)
	p.whole.Store(false) // from now on, paced
	if !p.b.PushedBack(sent) {
		return
	}
	p.cuts.Add(1)
	limit := p.observe(ctx)
	fields := []zap.Field{zap.String("code", codeName(code)), zap.Float64("writeRateLimit", limit), zap.Error(err)}
	if p.warned.CompareAndSwap(false, true) {
		p.log.Warn("the store pushed back: writing districts more slowly, and faster again as it accepts", fields...)
		return
	}
	p.log.Debug("the store pushed back: write rate lowered", fields...)
}

// observe notes the budget's rate now, and returns it.
func (p *pacer) observe(ctx context.Context) float64 {
	limit := p.b.Limit()
	p.mu.Lock()
	p.minLimit = min(p.minLimit, limit)
	p.mu.Unlock()
	p.tel.rateLimit(ctx, limit)
	return limit
}

// report is the job's WriteRate.
func (p *pacer) report() WriteRate {
	p.mu.Lock()
	minLimit := p.minLimit
	p.mu.Unlock()
	return WriteRate{LimitPerSec: p.b.Limit(), MinLimitPerSec: minLimit, Share: p.b.Share(),
		WaitedMs: time.Duration(p.waited.Load()).Milliseconds(), ResourceExhausted: int(p.exhausted.Load()),
		Aborted: int(p.aborted.Load()), Slowdowns: int(p.cuts.Load())}
}
