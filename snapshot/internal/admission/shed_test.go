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

	"github.com/snapwriter/snapwriter/locking"
)

// The policy starts at one chunk and adds one a round trip (for a chunk
// admitted since the last change, answered within TTL/12 of the fastest,
// while the last renewal was as fast); a chunk that queued more than
// TTL/6 halves the limit, and so does a renewal slower than TTL/6;
// between the thresholds it holds; stale signals — a chunk admitted or a
// renewal sent before the last change — are ignored.
func TestShedPolicy(t *testing.T) {
	const ttl = 6 * time.Second // slow: over 1 s; fast: up to 500 ms
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	now := time.Unix(1_800_000_000, 0)
	p := newShedPolicy(16, ttl)
	type want struct {
		limit int
		cut   bool
	}
	chunk := func(step string, latency time.Duration, epoch int, w want) {
		t.Helper()
		now = now.Add(latency)
		if limit, cut := p.chunk(latency, epoch, now); limit != w.limit || cut != w.cut {
			t.Errorf("%s: chunk of %s in epoch %d: limit %d, cut %v; want %d, %v", step, latency, epoch, limit, cut, w.limit, w.cut)
		}
	}
	renewal := func(step string, latency time.Duration, err error, w want) {
		t.Helper()
		now = now.Add(latency)
		if limit, cut := p.renewal(locking.RenewalStat{Latency: latency, TTL: ttl, Attempts: 1, Err: err}, now); limit != w.limit || cut != w.cut {
			t.Errorf("%s: renewal of %s: limit %d, cut %v; want %d, %v", step, latency, limit, cut, w.limit, w.cut)
		}
	}
	if p.limit != 1 || p.admits() != 1 {
		t.Fatalf("starts at %d chunks; want 1", p.limit)
	}
	chunk("first, the fastest", ms(100), 0, want{2, false}) // epoch 1
	chunk("stale: admitted before the growth", ms(100), 0, want{2, false})
	for n := 3; n <= 16; n++ {
		chunk("one a round trip", ms(100+500), p.epoch, want{n, false}) // 500 ms over the fastest: still fast
	}
	chunk("capped", ms(100), p.epoch, want{16, false})
	chunk("hold band", ms(100+700), p.epoch, want{16, false})
	e := p.epoch
	chunk("queued past TTL/6", ms(100+1001), e, want{8, true})
	chunk("stale: admitted before the halving", ms(100+5000), e, want{8, false})
	renewal("renewal within TTL/6", ms(1000), nil, want{8, false})
	chunk("fast chunk, last renewal in the hold band: no growth", ms(100), p.epoch, want{8, false})
	renewal("fast renewal", ms(400), nil, want{8, false})
	chunk("fast chunk, fast renewal", ms(100), p.epoch, want{9, false})
	renewal("slow renewal", ms(1001), nil, want{4, true})
	now = now.Add(-ms(500)) // a renewal sent before that halving, ending 500 ms after it:
	renewal("stale renewal", ms(2000), nil, want{4, false})
	renewal("slow renewal sent as the last ended", ms(1500), nil, want{2, true})
	renewal("again", ms(1500), nil, want{1, true})
	renewal("nothing left to halve", ms(1500), nil, want{1, false})
	chunk("nothing left to halve", ms(100+2000), p.epoch, want{1, false})
	if !p.overdue() || p.admits() != 0 || p.overdue() {
		t.Errorf("an overdue renewal: admits %d; want a pause (once)", p.admits())
	}
	renewal("the overdue renewal answered", ms(1100), nil, want{1, false})
	if p.admits() != 1 {
		t.Errorf("admits %d after the overdue renewal was answered; want 1", p.admits())
	}
	renewal("the renewal that lost the lease", ms(4000), locking.ErrLeaseLost, want{1, false})
	if w := (Renewals{Count: 8, SlowestMs: 2000, Sheds: 4, MinConcurrency: 1, Pauses: 1}); p.stats != w {
		t.Errorf("stats %+v; want %+v (the lost renewal not counted)", p.stats, w)
	}
}

// A write that never shed reports its configured concurrency as the
// fewest chunks at once, slow start or not.
func TestShedPolicyNeverShed(t *testing.T) {
	p := newShedPolicy(3, 30*time.Second)
	p.renewal(locking.RenewalStat{Latency: 40 * time.Millisecond, TTL: 30 * time.Second}, time.Now())
	if want := (Renewals{Count: 1, SlowestMs: 40, MinConcurrency: 3}); p.stats != want {
		t.Errorf("stats %+v; want %+v", p.stats, want)
	}
}

// The shedder admits chunks up to the policy's limit: when a slow renewal
// halves it, chunks already in flight run on and no new one starts until
// fewer than the new limit are in flight; as fast chunks raise it, waiting
// chunks start. One WARNING says when shedding started.
func TestShedderAdmitsUpToTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 6 * time.Second
		core, logs := observer.New(zapcore.DebugLevel)
		s := newShedder(4, ttl, zap.New(core))
		ctx := context.Background()
		fast := 10 * time.Millisecond
		// 1, then one more per fast chunk admitted since the last change,
		// up to 4: each chunk here ends before the next starts.
		for n := 1; n <= 4; n++ {
			epoch, ok := s.enter(ctx, ctx)
			if !ok {
				t.Fatalf("enter refused chunk %d", n)
			}
			s.committed(fast, epoch)
			s.leave()
		}
		for n := 1; n <= 4; n++ {
			if _, ok := s.enter(ctx, ctx); !ok {
				t.Fatalf("enter refused chunk %d in flight", n)
			}
		}
		admitted := make(chan int, 8)
		waiting, stopWaiting := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				if _, ok := s.enter(waiting, ctx); ok {
					admitted <- i
				}
			})
		}
		defer func() {
			stopWaiting() // the one still waiting gives up
			wg.Wait()
		}()
		synctest.Wait()
		if len(admitted) != 0 {
			t.Fatalf("%d chunks admitted beyond the limit of 4", len(admitted))
		}
		s.renewed(locking.RenewalStat{Latency: 2 * time.Second, TTL: ttl}) // limit 2
		s.leave()
		s.leave()
		synctest.Wait()
		if len(admitted) != 0 {
			t.Fatalf("%d chunks admitted with 2 in flight and a limit of 2", len(admitted))
		}
		s.leave()
		synctest.Wait()
		if len(admitted) != 1 {
			t.Fatalf("%d chunks admitted with 1 in flight and a limit of 2; want 1", len(admitted))
		}
		// Within TTL/2 of the slow renewal's send: no renewal is overdue.
		time.Sleep(900 * time.Millisecond)
		s.renewed(locking.RenewalStat{Latency: 100 * time.Millisecond, TTL: ttl})
		halved := s.policy.epoch
		s.committed(fast, halved) // a chunk admitted since the halving: 3
		synctest.Wait()
		if len(admitted) != 2 {
			t.Fatalf("%d chunks admitted after the limit grew to 3 with 2 in flight; want 2", len(admitted))
		}
		s.committed(fast, halved) // stale: admitted before the growth
		synctest.Wait()
		if len(admitted) != 2 {
			t.Fatalf("%d chunks admitted after a stale signal; want still 2", len(admitted))
		}
		time.Sleep(2 * time.Second)                                        // sent after the first halving
		s.renewed(locking.RenewalStat{Latency: 2 * time.Second, TTL: ttl}) // 1: a second halving, no second warning
		warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
		if len(warns) != 1 {
			t.Fatalf("%d warnings; want one, when shedding started", len(warns))
		}
		f := warns[0].ContextMap()
		if f["renewalLatency"] != 2*time.Second || f["concurrency"] != int64(2) || f["configuredConcurrency"] != int64(4) || f["signal"] != "a lock renewal" {
			t.Errorf("warning fields %v; want the renewal's latency and the new concurrency", f)
		}
		if got := s.summary(); got != (Renewals{Count: 3, SlowestMs: 2000, Sheds: 2, MinConcurrency: 1}) {
			t.Errorf("summary %+v", got)
		}
	})
}

// A renewal unanswered TTL/6 past its due time (TTL/3 after the last was
// sent) pauses the write — no chunk starts, the ones in flight run on —
// until it is answered; the first pause is the write's one WARNING.
func TestShedderPausesWhileRenewalOverdue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 6 * time.Second // due 2 s after the last, overdue 1 s later
		core, logs := observer.New(zapcore.DebugLevel)
		s := newShedder(4, ttl, zap.New(core))
		defer s.stop()
		ctx := context.Background()
		s.start(time.Now())
		if _, ok := s.enter(ctx, ctx); !ok {
			t.Fatal("enter refused the first chunk")
		}
		time.Sleep(3*time.Second - time.Nanosecond)
		s.leave()
		if _, ok := s.enter(ctx, ctx); !ok {
			t.Fatal("paused before the renewal was overdue")
		}
		s.leave()
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		admitted := make(chan bool, 1)
		go func() {
			_, ok := s.enter(ctx, ctx)
			admitted <- ok
		}()
		synctest.Wait()
		if len(admitted) != 0 {
			t.Fatal("a chunk started while a renewal was overdue")
		}
		if w := logs.FilterLevelExact(zapcore.WarnLevel).All(); len(w) != 1 || w[0].ContextMap()["signal"] != "a lock renewal overdue" {
			t.Errorf("warnings %v; want one, saying a renewal is overdue", w)
		}
		s.renewed(locking.RenewalStat{Latency: 1500 * time.Millisecond, TTL: ttl}) // answered
		if !<-admitted {
			t.Fatal("the chunk did not start once the renewal was answered")
		}
		s.leave()
		if got := s.summary(); got.Pauses != 1 || got.Count != 1 {
			t.Errorf("summary %+v; want one pause, one renewal", got)
		}
	})
}

// A renewal answered at the very moment it would be overdue does not
// leave the write paused: the timer of a watch that a renewal ended is
// stale, even when it runs after the renewal was taken into account.
func TestShedderOverdueTimerStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 6 * time.Second
		s := newShedder(4, ttl, zap.NewNop())
		defer s.stop()
		s.start(time.Now())
		s.mu.Lock()
		first := s.watched
		s.mu.Unlock()
		time.Sleep(2 * time.Second)
		s.renewed(locking.RenewalStat{Latency: 100 * time.Millisecond, TTL: ttl})
		s.overdue(first) // the first watch's timer, late
		s.mu.Lock()
		admits, pauses := s.policy.admits(), s.policy.stats.Pauses
		s.mu.Unlock()
		if admits != 1 || pauses != 0 {
			t.Errorf("admits %d, %d pauses after a stale timer; want 1, none", admits, pauses)
		}
	})
}

// A chunk waiting to start gives up when the write stops starting chunks
// (its start context ends) or its work context ends (the lease is lost),
// and takes no place in flight.
func TestShedderEnterStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newShedder(1, time.Second, zap.NewNop())
		bg := context.Background()
		if _, ok := s.enter(bg, bg); !ok {
			t.Fatal("first enter refused")
		}
		for _, which := range []string{"start", "work"} {
			ctx, cancel := context.WithCancelCause(bg)
			done := make(chan bool, 1)
			go func() {
				var ok bool
				if which == "start" {
					_, ok = s.enter(ctx, bg)
				} else {
					_, ok = s.enter(bg, ctx)
				}
				done <- ok
			}()
			synctest.Wait()
			cancel(errors.New("stop"))
			if <-done {
				t.Errorf("enter admitted a chunk after its %s context ended", which)
			}
		}
		s.leave()
		if _, ok := s.enter(bg, bg); !ok {
			t.Error("the give-ups took places in flight")
		}
	})
}

// A held shedder starts no chunk, whatever its limit, and lets the chunks
// in flight run on; unheld, the waiting chunks start.
func TestShedderHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newShedder(1, 6*time.Second, zap.NewNop())
		ctx := context.Background()
		if _, ok := s.enter(ctx, ctx); !ok {
			t.Fatal("enter refused the first chunk")
		}
		s.hold()
		if n := s.inFlight(); n != 1 {
			t.Errorf("%d chunks in flight; want 1", n)
		}
		admitted := make(chan bool, 1)
		go func() {
			_, ok := s.enter(ctx, ctx)
			admitted <- ok
		}()
		s.leave()
		synctest.Wait()
		if len(admitted) != 0 {
			t.Fatal("a chunk started while held")
		}
		s.unhold()
		synctest.Wait()
		if len(admitted) != 1 || !<-admitted {
			t.Fatal("no chunk started once unheld")
		}
	})
}
