// Package pacing paces document writes into a new Firestore key range as
// Firestore's best practices ask: no more than 500 writes a second at
// first, 50 % more every 5 minutes (the "500/50/5" rule, the Node and Java
// BulkWriter's default), that budget divided among the writers that share
// the range (as Apache Beam's Firestore connector divides it among its
// workers), and lowered at once when the store pushes back.
//
// A push-back (RESOURCE_EXHAUSTED, or ABORTED for contention) lowers the
// rate to just under what the store was seen to take — the writes it
// accepted in the last two seconds — rather than by a fixed factor, and
// the rate climbs back on TCP CUBIC's curve, in seconds' worth of
// accepted writes: quickly at first, then flat near what the store took,
// where it holds, then ever faster beyond it, probing for a store that
// takes more again. A probe the store refuses about where it refused the
// last one doubles the next hold (up to 40 s). Beyond the climb back to
// what the store took, the rate rises only while the writer uses all of
// it, as TCP grows its window only while the window limits it (RFC 7661):
// a rate the writer cannot fill (its chunks in flight and their round
// trips allow less) is never shown to be taken by the store, and holds.
// A writer into a store slower than its budget so settles just under the
// store's rate and is refused once per probe, ever more rarely, not every
// second; writers sharing a budget each cut their own share, by what the
// store took from each.
//
// A Budget is one writer's share of that rate, safe for concurrent use:
// every write of the range in a process takes its writes from the same
// Budget, so dates written at once share it too.
//
//	b, err := pacing.New(pacing.DefaultRamp(), taskCount)
//	end, whole := b.Begin(len(writes))     // a write into a new key range starts
//	defer end()
//	taken := time.Now()
//	waited, err := b.Wait(ctx, len(chunk)) // before each commit attempt
//	…
//	switch status.Code(err) {
//	case codes.OK:
//		b.Accepted(len(chunk))
//	case codes.ResourceExhausted:
//		b.PushedBack(taken)                  // the attempt whose writes were taken then was refused
//	}
//
// The token bucket is golang.org/x/time/rate's; this package decides its
// rate.
package pacing

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The ramp's defaults: Firestore's "500/50/5" guidance, with the Node
// BulkWriter's cap.
const (
	DefaultInitial = 500
	DefaultMax     = 10000
	DefaultGrowth  = 1.5
	DefaultEvery   = 5 * time.Minute
)

// How a budget answers push-back.
const (
	// floorShare of the share's initial rate is the lowest a cut goes.
	floorShare = 0.05
	// acceptedWindow is how far back the writes the store accepted tell
	// what it takes.
	acceptedWindow = 2 * time.Second
	// plateauShare of what the store was seen to take is where the rate
	// climbs back to and holds; a cut lowers the rate to cutShare of that
	// (and by at least 1 − cutShare).
	plateauShare = 0.95
	cutShare     = 0.9
	// plateauSeconds is how many seconds' worth of accepted writes a cut
	// of 1 − cutShare takes to climb back to its plateau (CUBIC's K):
	// the curve is within 1 % of the plateau for the last 4.6 s of it.
	// It then holds the plateau (minHold), and beyond that climbs by
	// probeShare of the share's initial rate times the seconds since,
	// cubed — the same steps for every writer sharing a budget, so that
	// one left with less catches up: at the default 500/s, 5 % above a
	// 95/s plateau 3.6 s into the probe, 2.4 times it 11 s in.
	plateauSeconds = 10.0
	cubicC         = (1 - cutShare) / (plateauSeconds * plateauSeconds * plateauSeconds)
	probeShare     = 2 * cubicC
	// minHold is how many seconds' worth of accepted writes the rate
	// holds at the plateau before probing beyond it; a probe refused
	// below sameLevel × the plateau found nothing new, and doubles the
	// next hold, up to maxHold.
	minHold   = 5.0
	maxHold   = 40.0
	sameLevel = 1.3
	// burstSeconds is the bucket's size, in seconds of the current rate:
	// a writer's busiest second stays within 1.1 times its rate.
	burstSeconds = 0.1
	// unusedHold is how long the climb holds after a Wait found the
	// bucket full: the rate had gone unused for burstSeconds at least.
	unusedHold = 2 * time.Second
)

// Ramp is the schedule of a key range's write rate: Initial document
// writes a second at first, multiplied by Growth every Every, at most Max.
// Growth 1 (or Max equal to Initial) holds Initial: no ramp.
type Ramp struct {
	Initial float64
	Max     float64
	Growth  float64
	Every   time.Duration
}

// DefaultRamp is Firestore's "500/50/5": 500 writes/s, 50 % more every 5
// minutes, at most 10,000 writes/s.
func DefaultRamp() Ramp {
	return Ramp{Initial: DefaultInitial, Max: DefaultMax, Growth: DefaultGrowth, Every: DefaultEvery}
}

// Fixed is the ramp that holds rate r from the start: for a database
// whose sustained rate was measured, or a range that is not new.
func Fixed(r float64) Ramp { return Ramp{Initial: r, Max: r, Growth: 1, Every: DefaultEvery} }

// WithMax is r capped at m writes a second: Max m, and Initial lowered to
// m when it was above it — an operator's measured maximum (loadtest's)
// given without a start of its own lowers the default start, 500/s, to it.
func (r Ramp) WithMax(m float64) Ramp {
	r.Max = m
	r.Initial = min(r.Initial, m)
	return r
}

// Validate reports a ramp that cannot work, naming the first bad field.
func (r Ramp) Validate() error {
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	switch {
	case !finite(r.Initial) || r.Initial <= 0:
		return fmt.Errorf("pacing: initial rate %v: want a positive number of writes a second", r.Initial)
	case !finite(r.Max) || r.Max < r.Initial:
		return fmt.Errorf("pacing: maximum rate %v: want at least the initial rate, %v", r.Max, r.Initial)
	case !finite(r.Growth) || r.Growth < 1:
		return fmt.Errorf("pacing: growth %v: want a finite factor ≥ 1", r.Growth)
	case r.Growth > 1 && r.Every <= 0:
		return fmt.Errorf("pacing: growth every %s: want a positive duration", r.Every)
	}
	return nil
}

// At is the ramp's rate elapsed after its start:
// min(Max, Initial·Growth^⌊elapsed/Every⌋).
func (r Ramp) At(elapsed time.Duration) float64 {
	if r.Growth <= 1 || r.Every <= 0 || elapsed < r.Every {
		return min(r.Initial, r.Max)
	}
	steps := float64(elapsed / r.Every)
	return math.Min(r.Max, r.Initial*math.Pow(r.Growth, steps))
}

// Stats is what a Budget did since New.
type Stats struct {
	// Limit is the rate now, in writes a second (this budget's share).
	Limit float64
	// MinLimit is the lowest rate so far.
	MinLimit float64
	// Writes counts the writes Wait admitted.
	Writes int64
	// Waited is the time Waits spent blocked, summed over the callers.
	Waited time.Duration
	// PushBacks counts the refusals PushedBack was told of; Cuts, those
	// that lowered the rate.
	PushBacks, Cuts int
	// Unused counts the acceptances that did not move the rate on from
	// its plateau after a push-back, because the writer had not been
	// using all of it (Accepted).
	Unused int
}

// Budget is one writer's share of a key range's write rate: the ramp's
// rate divided by the writers sharing it, lowered by push-back. It is safe
// for concurrent use.
type Budget struct {
	ramp  Ramp
	share int

	mu     sync.Mutex
	lim    *rate.Limiter
	active int       // writes begun and not ended
	start  time.Time // of the ramp; zero until a write begins
	// ceiling caps the rate after push-back, and climbs back as the
	// store accepts (Accepted); 0 when no push-back is in force.
	ceiling float64
	cutAt   time.Time // when push-back last lowered the rate
	// recovery is the curve the ceiling climbs back on since the last
	// cut.
	recovery recovery
	// accepted are the writes the store accepted in the last
	// acceptedWindow, oldest first: what it takes.
	accepted []acceptance
	// unusedAt is when a Wait last found the bucket full: the writer
	// was not using all of its rate then.
	unusedAt time.Time
	// waited: a Wait has reserved writes since the ramp (re)started;
	// before the first, the bucket is full because the write is new.
	waited bool
	// backingOff counts the refused commits whose retries have not yet
	// come back to Wait: a bucket that fills while they wait out their
	// backoff shows the store's refusals, not a writer short of work.
	backingOff int
	stats      Stats
}

// New returns the budget of one of share writers (at least 1) that
// divide ramp r among themselves.
func New(r Ramp, share int) (*Budget, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if share < 1 {
		return nil, fmt.Errorf("pacing: %d writers sharing the budget: want at least 1", share)
	}
	initial := r.Initial / float64(share)
	b := &Budget{ramp: r, share: share, lim: rate.NewLimiter(rate.Limit(initial), burst(initial))}
	b.stats.Limit, b.stats.MinLimit = initial, initial
	return b, nil
}

// Ramp is the schedule b follows, before its division among the writers.
func (b *Budget) Ramp() Ramp { return b.ramp }

// Share is the number of writers dividing the ramp.
func (b *Budget) Share() int { return b.share }

// Limit is b's rate now, in writes a second.
func (b *Budget) Limit() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.adjust(time.Now())
	return b.stats.Limit
}

// MaxCommit is the most writes one commit should carry to stay within b
// second by second, not only on average: a tenth of a second of the
// share's initial rate, rounded down (50 of 500/s, 12 of a quarter of
// it), at least one. A commit is admitted whole, so a writer's busiest
// second holds its rate and one commit; writers sharing a ramp add their
// commits up, and commits of more than this would take them past the ramp
// by more than a tenth.
func (b *Budget) MaxCommit() int { return max(1, int(b.initial()*burstSeconds)) }

// Stats returns what b did so far.
func (b *Budget) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.adjust(time.Now())
	return b.stats
}

// Begin notes that a write of n writes into the key range starts, and
// returns the function that notes its end. A write that begins while none
// is under way starts the ramp again: each day's snapshot is a new key
// range. Writes that overlap share one ramp, from the first one's start.
//
// whole reports that the write may take its writes without waiting
// (Take): it begins alone, with no push-back in force, and its n writes
// are at most one second of the rate, so that no second of it can hold
// more than the rate allows however fast it goes — the application's
// 132-district snapshot is not slowed to a tenth of a second at a time.
// Its writes are still counted: a write that follows waits until they
// are paid for.
func (b *Budget) Begin(n int) (end func(), whole bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.active == 0 {
		b.restart(time.Now())
		whole = b.ceiling == 0 && float64(n) <= b.stats.Limit
	}
	b.active++
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.active--
			if b.active == 0 {
				b.start = time.Time{}
			}
		})
	}, whole
}

// Take takes n writes from the budget without waiting, running into debt
// that later Waits pay back: for a write that Begin found whole.
func (b *Budget) Take(n int) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.adjust(now)
	for left := n; left > 0; {
		k := min(left, b.lim.Burst())
		b.lim.ReserveN(now, k) // k ≤ burst: always OK; its delay is the debt
		left -= k
	}
	b.stats.Writes += int64(n)
}

// restart starts the ramp at now, keeping a push-back in force. Callers
// hold b.mu.
func (b *Budget) restart(now time.Time) {
	b.start = now
	b.waited, b.backingOff = false, 0
	b.adjust(now)
}

// Wait blocks until n more writes fit in the budget, or until ctx ends
// (context.Cause(ctx) then, and the writes are given back); it returns how
// long it waited. The n writes are reserved together, a bucket at a time
// but back to back, so that concurrent callers are admitted one after the
// other, each when its last write is due: the commits that follow are
// spaced by the rate, not bunched.
func (b *Budget) Wait(ctx context.Context, n int) (time.Duration, error) {
	t0 := time.Now()
	b.mu.Lock()
	if b.start.IsZero() {
		b.restart(t0) // a caller that never called Begin
	}
	b.adjust(t0)
	if b.waited && b.lim.TokensAt(t0) >= float64(b.lim.Burst()) {
		// The rate went unused — while the writer's refused commits
		// waited out their backoff, if some did: this Wait is taken for
		// the first of their retries.
		if b.backingOff > 0 {
			b.backingOff--
		} else {
			b.unusedAt = t0
		}
	}
	b.waited = true
	var rs []*rate.Reservation
	for left := n; left > 0; {
		k := min(left, b.lim.Burst())
		rs = append(rs, b.lim.ReserveN(t0, k)) // k ≤ burst: always OK
		left -= k
	}
	b.stats.Writes += int64(n)
	b.mu.Unlock()
	var due time.Duration
	if len(rs) > 0 {
		due = rs[len(rs)-1].DelayFrom(t0)
	}
	if due > 0 {
		t := time.NewTimer(due)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			for i := len(rs) - 1; i >= 0; i-- {
				rs[i].Cancel()
			}
			b.mu.Lock()
			b.stats.Writes -= int64(n)
			b.stats.Waited += time.Since(t0)
			b.mu.Unlock()
			return time.Since(t0), context.Cause(ctx)
		}
	}
	waited := time.Since(t0)
	b.mu.Lock()
	b.stats.Waited += waited
	b.mu.Unlock()
	return waited, nil
}

// Accepted tells b that the store accepted a commit of n writes. While a
// push-back holds the rate down, the rate climbs back on the recovery
// curve by the time those writes take at the current rate. Once the curve
// is back at its plateau — what the store was seen to take — it moves on
// (the hold, then the probe beyond) only while the writer has been using
// all of the rate: not within two seconds of a Wait that found the bucket
// full (but for a write's first Wait, and the first after a refusal,
// which a retry back from its backoff makes: they find it full for other
// reasons). A writer that cannot fill its rate learns nothing new from
// the store's accepting it, and a rate raised on that would be a promise
// the store never made: the writer's next burst, when it can fill the
// rate, would go out above anything the store took.
func (b *Budget) Accepted(n int) {
	if n <= 0 {
		return
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.accepted = append(b.pruned(now), acceptance{at: now, n: n})
	switch {
	case b.ceiling == 0:
	case b.recovery.atPlateau() && now.Sub(b.unusedAt) < unusedHold:
		b.stats.Unused++
	default:
		b.ceiling = b.recovery.advance(float64(n) / b.ceiling)
		b.adjust(now)
	}
}

// PushedBack tells b that the store refused, for load, a commit whose
// writes were taken from b at taken (when its Wait began):
// RESOURCE_EXHAUSTED, or ABORTED for contention. It lowers the rate to
// cutShare of the plateau — plateauShare of the writes the store accepted
// from b in the last two seconds, a second's worth (or the time since the
// ramp started, if shorter) — and by a tenth at least. The first cut
// goes no lower than 0.9 × a quarter of the rate: a write's first commits are
// its own pace as much as the store's. While an earlier cut is still in
// force the plateau falls to half the last one at most, as TCP halves
// its window. A store that accepted nothing in the window
// is out, not slow: the rate is halved, and climbs back towards the
// plateau before once the store accepts again. The rate never goes below
// a floor of a twentieth of the share's initial rate. A commit whose
// writes were taken before the last cut cuts nothing: it went out at the
// rate before, and the answers of one wave of commits cut the rate once,
// not once each.
// It reports whether it lowered the rate.
func (b *Budget) PushedBack(taken time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stats.PushBacks++
	b.backingOff++
	if taken.Before(b.cutAt) {
		return false
	}
	now := time.Now()
	b.adjust(now)
	cur := b.stats.Limit
	// What the store took: the writes it accepted over the window, a
	// second's worth over the time since the ramp started when that is
	// shorter (but a second at least: a write's first commits go out
	// together).
	span := acceptedWindow
	if !b.start.IsZero() {
		span = min(span, max(now.Sub(b.start), time.Second))
	}
	took := 0
	for _, a := range b.pruned(now) {
		took += a.n
	}
	b.ceiling, b.recovery = b.cut(cur, plateauShare*float64(took)/span.Seconds())
	b.cutAt = now
	b.adjust(now)
	if b.stats.Limit >= cur {
		return false
	}
	b.stats.Cuts++
	return true
}

// cut is the ceiling a push-back at rate cur sets, and the recovery
// from it, when the store was seen to take seen writes a second (less a
// twentieth). Callers hold b.mu.
func (b *Budget) cut(cur, seen float64) (float64, recovery) {
	prev := cur // the plateau before this cut
	if b.ceiling > 0 {
		prev = b.recovery.plateau
	}
	// A probe refused where the last plateau was taught nothing new:
	// hold there twice as long before the next.
	hold := minHold
	if r := b.recovery; b.ceiling > 0 && r.probing() && cur <= sameLevel*r.plateau {
		hold = min(2*r.hold, maxHold)
	}
	var ceiling, plateau float64
	switch {
	case seen == 0:
		// Nothing accepted lately: an outage, not a capacity. Halve, and
		// climb back towards the plateau before it once the store accepts.
		ceiling, plateau = cur/2, prev
	case b.ceiling > 0:
		plateau = max(seen, prev/2)
		ceiling = cutShare * min(cur, plateau)
	default:
		// The first cut: what a write took at its start is its own pace
		// as much as the store's (its chunks in flight grow from one), so
		// no lower than a quarter of the rate; but a bound is no measure
		// of the store, and the climb back aims at what was seen.
		plateau = seen
		ceiling = cutShare * min(cur, max(seen, cur/4))
	}
	ceiling = max(b.floor(), ceiling)
	return ceiling, newRecovery(ceiling, max(plateau, ceiling), b.initial(), hold)
}

// pruned is b.accepted without what is older than the window at now.
// Callers hold b.mu.
func (b *Budget) pruned(now time.Time) []acceptance {
	i := 0
	for i < len(b.accepted) && now.Sub(b.accepted[i].at) >= acceptedWindow {
		i++
	}
	b.accepted = b.accepted[i:]
	return b.accepted
}

// acceptance is a commit the store accepted: n writes at at.
type acceptance struct {
	at time.Time
	n  int
}

// recovery is the curve a ceiling climbs back on after a cut, in τ, the
// seconds' worth of writes the store has accepted since (TCP CUBIC's
// window curve, in rates): from the cut's rate it rises quickly, flattens
// as it nears the plateau — what the store was seen to take — and holds
// there for a while, then climbs ever faster beyond it to find a store
// that takes more again:
//
//	rate(τ) = plateau · (1 − cubicC·(K − τ)³)   before K; rate(0) = the cut's rate
//	rate(τ) = plateau                           for the hold after it
//	rate(τ) = plateau + initial · probeShare·x³  after, x = τ − K − hold
//
// τ counts only while the store accepts: a store that accepts nothing
// raises nothing.
type recovery struct {
	plateau, initial, k, hold, tau float64
}

func newRecovery(from, plateau, initial, hold float64) recovery {
	return recovery{plateau: plateau, initial: initial, hold: hold, k: math.Cbrt((1 - from/plateau) / cubicC)}
}

// atPlateau reports whether the curve has climbed back to its plateau:
// it holds there, or probes beyond it.
func (r recovery) atPlateau() bool { return r.tau >= r.k }

// probing reports whether the curve is past its plateau and its hold.
func (r recovery) probing() bool { return r.tau > r.k+r.hold }

// advance moves the curve on by dt seconds of accepted writes and
// returns its rate.
func (r *recovery) advance(dt float64) float64 {
	r.tau += dt
	switch x := r.tau - r.k; {
	case x < 0:
		return r.plateau * (1 + cubicC*x*x*x)
	case x < r.hold:
		return r.plateau
	default:
		x -= r.hold
		return r.plateau + r.initial*probeShare*x*x*x
	}
}

// initial is the share's rate at the ramp's start; floor and the
// recovery's step are fractions of it.
func (b *Budget) initial() float64 { return b.ramp.Initial / float64(b.share) }
func (b *Budget) floor() float64   { return b.initial() * floorShare }

// adjust sets the limiter's rate for now: the ramp's share, or the
// push-back's ceiling while that is lower. Callers hold b.mu.
func (b *Budget) adjust(now time.Time) {
	sched := b.initial()
	if !b.start.IsZero() {
		sched = b.ramp.At(now.Sub(b.start)) / float64(b.share)
	}
	limit := sched
	if b.ceiling > 0 {
		if b.ceiling >= sched {
			b.ceiling = 0 // recovered
		} else {
			limit = b.ceiling
		}
	}
	if limit == b.stats.Limit {
		return
	}
	b.lim.SetLimitAt(now, rate.Limit(limit))
	b.lim.SetBurstAt(now, burst(limit))
	b.stats.Limit = limit
	b.stats.MinLimit = min(b.stats.MinLimit, limit)
}

// burst is the bucket's size at rate r: a tenth of a second of it, at
// least one write.
func burst(r float64) int { return max(1, int(math.Ceil(r*burstSeconds))) }
