package admission

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	rpccode "google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/pacing"
)

// Rate is how a write paced its chunks' writes, and how the store
// answered them: snapshot.WriteRate, field for field, which documents
// them.
type Rate struct {
	LimitPerSec       float64
	MinLimitPerSec    float64
	StartPerSec       float64
	Share             int
	WaitedMs          int64
	ResourceExhausted int
	Aborted           int
	Slowdowns         int
}

// pacer is a write's use of its Writer's budget: it waits for the budget
// before each chunk attempt, tells the budget the store's answers, and
// counts what this write met (the budget is shared by the Writer's writes).
type pacer struct {
	b   *pacing.Budget
	m   Metrics
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

func newPacer(b *pacing.Budget, m Metrics, log *zap.Logger) *pacer {
	return &pacer{b: b, m: m, log: log, minLimit: b.Limit()}
}

// begin notes that the write's chunks of n writes in all start; the func
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
	p.m.BudgetWaited(ctx, d)
	p.observe(ctx)
	return d, err
}

// answered tells the budget how the store answered the attempt of n
// writes taken from it at taken: accepted, or refused for load.
func (p *pacer) answered(ctx context.Context, err error, taken time.Time, n int) {
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
	p.m.PushedBack(ctx, code)
	p.whole.Store(false) // from now on, paced
	if !p.b.PushedBack(taken) {
		return
	}
	p.cuts.Add(1)
	limit := p.observe(ctx)
	fields := []zap.Field{zap.String("code", rpccode.Code(code).String()), zap.Float64("writeRateLimit", limit), zap.Error(err)}
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
	p.m.RateLimit(ctx, limit)
	return limit
}

// report is the write's Rate.
func (p *pacer) report() Rate {
	p.mu.Lock()
	minLimit := p.minLimit
	p.mu.Unlock()
	return Rate{LimitPerSec: p.b.Limit(), MinLimitPerSec: minLimit, StartPerSec: p.b.Ramp().Initial / float64(p.b.Share()), Share: p.b.Share(),
		WaitedMs: time.Duration(p.waited.Load()).Milliseconds(), ResourceExhausted: int(p.exhausted.Load()),
		Aborted: int(p.aborted.Load()), Slowdowns: int(p.cuts.Load())}
}
