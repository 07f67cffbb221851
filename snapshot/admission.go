package snapshot

import (
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/pacing"
	"github.com/snapwriter/snapwriter/snapshot/internal/admission"
)

// When a write's chunks start, and how fast their writes go, is package
// admission's: the maintenance hold, fewer chunks at once while the lock's
// renewals slow down (shedding), and the write budget. What the write
// reports of them is here, with the option that sets the budget.
//
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
	// StartPerSec is the rate the budget's ramp starts at, this writer's
	// share of it (pacing.Ramp.Initial ÷ Share).
	StartPerSec float64 `json:"startPerSec"`
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

// LockRenewals is how the renewals of a write's lock went, and what the
// write did to keep them fast (see WithConcurrency).
type LockRenewals struct {
	// Count is how many renewals succeeded.
	Count int `json:"count"`
	// SlowestMs is the latency of the slowest of them, retries included.
	SlowestMs int64 `json:"slowestMs"`
	// Sheds counts the times the write halved the chunks it runs at once
	// because the store answered slowly (see WithConcurrency).
	Sheds int `json:"sheds"`
	// MinConcurrency is the fewest chunks a shed left in flight: the
	// configured concurrency when the write never shed.
	MinConcurrency int `json:"minConcurrency"`
	// Pauses counts the renewals that went unanswered TTL/6 past their
	// due time, during which the write started no chunk.
	Pauses int `json:"pauses"`
	// Lost: the lease ended mid-write (a renewal could not be made
	// before it expired), and no newer writer took the snapshot over: the
	// write started no chunk after it (ErrLockLost). The Result's JSON
	// says it as "lockLost".
	Lost bool `json:"-"`
}

// newAdmission is the admission gate of a job of w logging to log: w's
// concurrency and budget, under a lock of w's TTL.
func (w *Writer) newAdmission(log *zap.Logger) *admission.Gate {
	return admission.New(admission.Config{Concurrency: w.cfg.concurrency, LockTTL: w.cfg.lockTTL,
		Budget: w.cfg.budget, Metrics: w.tel, Log: log})
}

// admitted is what gate reports of the write: its lock's renewals (but
// for the loss of the lease, which the write's end decides) and its pace.
func admitted(gate *admission.Gate) (LockRenewals, WriteRate) {
	r := gate.Renewals()
	return LockRenewals{Count: r.Count, SlowestMs: r.SlowestMs, Sheds: r.Sheds, MinConcurrency: r.MinConcurrency, Pauses: r.Pauses},
		WriteRate(gate.Rate())
}
