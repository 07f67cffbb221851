package admission

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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/pacing"
)

// metrics counts what a Gate recorded.
type metrics struct {
	mu        sync.Mutex
	waits     []time.Duration
	limits    []float64
	pushBacks map[codes.Code]int
}

func (m *metrics) BudgetWaited(_ context.Context, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.waits = append(m.waits, d)
}

func (m *metrics) RateLimit(_ context.Context, limit float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.limits = append(m.limits, limit)
}

func (m *metrics) PushedBack(_ context.Context, code codes.Code) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pushBacks == nil {
		m.pushBacks = map[codes.Code]int{}
	}
	m.pushBacks[code]++
}

func fixed(t *testing.T, rate float64) *pacing.Budget {
	t.Helper()
	b, err := pacing.New(pacing.Fixed(rate), 1)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A stage that starts alone and whose writes fit in one second of the
// budget takes them without waiting; one that does not fit is spaced by
// the rate. Every attempt's wait is recorded, the ones of no time too.
func TestGateWholeStageIsNotSpaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := &metrics{}
		g := New(Config{Concurrency: 4, LockTTL: 6 * time.Second, Budget: fixed(t, 100), Metrics: m})
		end := g.Begin(100) // one second at 100/s
		for range 2 {
			if d, err := g.Wait(ctx, 50); d != 0 || err != nil {
				t.Errorf("Wait in a whole stage: %s, %v; want no wait", d, err)
			}
		}
		end()
		if len(m.waits) != 2 {
			t.Errorf("%d waits recorded; want 2", len(m.waits))
		}

		spaced := New(Config{Concurrency: 4, LockTTL: 6 * time.Second, Budget: fixed(t, 100)})
		defer spaced.Begin(101)()
		var waited time.Duration
		for range 2 {
			d, err := spaced.Wait(ctx, 50)
			if err != nil {
				t.Fatal(err)
			}
			waited += d
		}
		if waited == 0 {
			t.Error("a stage of more than a second of the budget was not spaced")
		}
		if got := spaced.Rate().WaitedMs; got != waited.Milliseconds() {
			t.Errorf("Rate().WaitedMs %d; want the waits' sum, %d", got, waited.Milliseconds())
		}
	})
}

// The store's push-back (RESOURCE_EXHAUSTED, ABORTED) cuts the rate once
// per wave — here, the store having accepted nothing, by half — and an
// answer to an attempt whose writes were taken before the last cut counts
// but cuts nothing; from then on the stage is paced, even one that began
// whole; other failures tell the budget nothing. One WARNING
// says the first slowdown; the next are DEBUG.
func TestGatePushBackCutsOncePerWave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := &metrics{}
		core, logs := observer.New(zapcore.DebugLevel)
		g := New(Config{Concurrency: 4, LockTTL: 6 * time.Second, Budget: fixed(t, 100), Metrics: m, Log: zap.New(core)})
		defer g.Begin(10)()
		exhausted := status.Error(codes.ResourceExhausted, "slow down")
		wave := time.Now()
		time.Sleep(10 * time.Millisecond)
		g.Answered(ctx, exhausted, wave, 10) // cut: 50/s
		g.Answered(ctx, exhausted, wave, 10) // the same wave
		g.Answered(ctx, status.Error(codes.Unavailable, "down"), wave, 10)
		g.Answered(ctx, errors.New("not a status"), wave, 10)
		time.Sleep(10 * time.Millisecond)
		g.Answered(ctx, status.Error(codes.Aborted, "contention"), time.Now(), 10) // cut: 25/s
		want := Rate{LimitPerSec: 25, MinLimitPerSec: 25, StartPerSec: 100, Share: 1, ResourceExhausted: 2, Aborted: 1, Slowdowns: 2}
		if got := g.Rate(); got != want {
			t.Errorf("Rate() %+v; want %+v", got, want)
		}
		if m.pushBacks[codes.ResourceExhausted] != 2 || m.pushBacks[codes.Aborted] != 1 || len(m.pushBacks) != 2 {
			t.Errorf("push-backs recorded %v; want 2 RESOURCE_EXHAUSTED, 1 ABORTED", m.pushBacks)
		}
		if w := logs.FilterLevelExact(zapcore.WarnLevel).All(); len(w) != 1 || w[0].ContextMap()["code"] != "RESOURCE_EXHAUSTED" {
			t.Errorf("warnings %v; want one, the first cut's", w)
		}
		if n := logs.FilterMessage("the store pushed back: write rate lowered").Len(); n != 1 {
			t.Errorf("%d DEBUG lines for the later cut; want 1", n)
		}
		if d, err := g.Wait(ctx, 10); d == 0 || err != nil {
			t.Errorf("Wait after push-back: %s, %v; want paced, though the stage began whole", d, err)
		}
	})
}

// A chunk's latency, as shedding sees it, leaves out its attempts' waits
// for the budget: two seconds of which 1.9 s were the budget's is a fast
// chunk, and grows the limit; the same two seconds spent at the store
// halve it. A chunk that failed, or was never admitted, tells shedding
// nothing, and every Ticket's Done frees its place.
func TestTicketLeavesBudgetWaitOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		g := New(Config{Concurrency: 4, LockTTL: 6 * time.Second, Budget: fixed(t, 100)}) // slow: over 1 s
		limit := func() int {
			g.shed.mu.Lock()
			defer g.shed.mu.Unlock()
			return g.shed.policy.limit
		}
		chunk := func(took, budgetWait time.Duration, committed bool) {
			t.Helper()
			tk := g.Admit(ctx, ctx)
			if tk == nil {
				t.Fatal("Admit refused a chunk")
			}
			time.Sleep(took)
			tk.Done(committed, budgetWait)
		}
		chunk(100*time.Millisecond, 0, true) // the fastest: 2
		chunk(2*time.Second, 1900*time.Millisecond, true)
		if got := limit(); got != 3 {
			t.Errorf("limit %d after a chunk that mostly waited for the budget; want 3 (grown)", got)
		}
		chunk(2*time.Second, 0, false)
		if got := limit(); got != 3 {
			t.Errorf("limit %d after a failed chunk; want 3", got)
		}
		chunk(2*time.Second, 0, true)
		if got, r := limit(), g.Renewals(); got != 1 || r.Sheds != 1 {
			t.Errorf("limit %d, %+v after a chunk that queued 1.9 s at the store; want 1, one shed", got, r)
		}
		if n := g.InFlight(); n != 0 {
			t.Errorf("%d chunks in flight after every Done", n)
		}
		g.Hold()
		stopped, stop := context.WithCancel(ctx)
		stop()
		tk := g.Admit(stopped, ctx)
		if tk != nil {
			t.Fatal("Admit admitted a chunk while held, after its start context ended")
		}
		tk.Done(true, 0) // a nil Ticket: nothing
		if n := g.InFlight(); n != 0 {
			t.Errorf("%d chunks in flight after a refused Admit", n)
		}
	})
}
