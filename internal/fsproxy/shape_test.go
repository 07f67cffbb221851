package fsproxy

import (
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const docs = "projects/p/databases/(default)/documents/"

// districts returns n writes to snapshots/2026-11-20/districts/{from…}.
func districts(from, n int) []write {
	ws := make([]write, n)
	for i := range ws {
		ws[i] = write{doc: docs + "snapshots/2026-11-20/districts/d" + itoa(from+i), collection: "districts"}
	}
	return ws
}

func itoa(i int) string { return time.Duration(i).String() } // unique, short

func one(doc string) []write { return []write{{doc: docs + doc, collection: collectionID(docs + doc)}} }

// codeOf is the status code of a verdict's error, OK for none.
func codeOf(v verdict) codes.Code { return status.Code(v.err) }

func TestCollectionID(t *testing.T) {
	for name, want := range map[string]string{
		docs + "snapshots/2026-11-20/districts/42": "districts",
		docs + "snapshots/2026-11-20":              "snapshots",
		docs + "locks/snapshot":                    "locks",
		"x":                                        "",
	} {
		if got := collectionID(name); got != want {
			t.Errorf("collectionID(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestWritesOf(t *testing.T) {
	req := &firestorepb.CommitRequest{Writes: []*firestorepb.Write{
		{Operation: &firestorepb.Write_Update{Update: &firestorepb.Document{Name: docs + "a/1"}}},
		{Operation: &firestorepb.Write_Delete{Delete: docs + "b/2"}},
		{Operation: &firestorepb.Write_Transform{Transform: &firestorepb.DocumentTransform{Document: docs + "c/3"}}},
	}}
	want := []write{{docs + "a/1", "a"}, {docs + "b/2", "b"}, {docs + "c/3", "c"}}
	if got := writesOf(req); !slices.Equal(got, want) {
		t.Errorf("writesOf = %v, want %v", got, want)
	}
}

func TestRampSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCore(Config{Ramp: Ramp{Collection: "districts", Start: 100, Growth: 2, Every: 2 * time.Second, Max: 500}}, time.Now())
		if r := c.ramp.rateAt(time.Now()); r != 0 {
			t.Fatalf("rate before the first write = %v, want 0", r)
		}
		// Writes elsewhere do not start the clock.
		if v := c.decide(one("other/x"), time.Now()); codeOf(v) != codes.OK {
			t.Fatalf("write elsewhere: %v", v.err)
		}
		time.Sleep(time.Hour)
		if r := c.ramp.rateAt(time.Now()); r != 0 {
			t.Fatalf("rate after a write elsewhere = %v, want 0", r)
		}
		t0 := time.Now()
		if v := c.decide(districts(0, 1), t0); codeOf(v) != codes.OK {
			t.Fatalf("first write: %v", v.err)
		}
		for _, step := range []struct {
			at   time.Duration
			want float64
		}{
			{0, 100}, {1999 * time.Millisecond, 100}, {2 * time.Second, 200}, {3999 * time.Millisecond, 200},
			{4 * time.Second, 400}, {6 * time.Second, 500}, {time.Hour, 500},
		} {
			time.Sleep(time.Until(t0.Add(step.at)))
			if r := c.ramp.rateAt(time.Now()); r != step.want {
				t.Errorf("rate %v after the first write = %v, want %v", step.at, r, step.want)
			}
		}
	})
	// The defaults: 500/50/5.
	r := newRamp(Ramp{Start: 500})
	t0 := time.Now()
	r.advance(t0)
	for _, step := range []struct {
		at   time.Duration
		want float64
	}{{0, 500}, {5 * time.Minute, 750}, {10 * time.Minute, 1125}, {15 * time.Minute, 1687.5}} {
		if got := r.rateAt(t0.Add(step.at)); got != step.want {
			t.Errorf("500/50/5 after %v = %v, want %v", step.at, got, step.want)
		}
	}
}

func TestRampBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCore(Config{Ramp: Ramp{Collection: "districts", Start: 100, Growth: 2, Every: 2 * time.Second}}, time.Now())
		next := 0
		commit := func(n int) codes.Code {
			v := c.decide(districts(next, n), time.Now())
			if v.forward {
				c.applied(districts(next, n), time.Now(), true)
			}
			next += n
			return codeOf(v)
		}
		// A full bucket: one second of the rate.
		for i := range 10 {
			if got := commit(10); got != codes.OK {
				t.Fatalf("commit %d of a full bucket: %v", i, got)
			}
		}
		if got := commit(10); got != codes.ResourceExhausted {
			t.Fatalf("commit beyond the bucket: %v, want ResourceExhausted", got)
		}
		// 100 ms refill 10 tokens, exactly: refused commits spent none.
		time.Sleep(99 * time.Millisecond)
		if got := commit(10); got != codes.ResourceExhausted {
			t.Fatalf("commit after 99 ms: %v, want ResourceExhausted", got)
		}
		time.Sleep(time.Millisecond)
		if got := commit(10); got != codes.OK {
			t.Fatalf("commit after 100 ms: %v, want OK", got)
		}
		if got := commit(1); got != codes.ResourceExhausted {
			t.Fatalf("commit of 1 on an empty bucket: %v", got)
		}
		// A commit larger than the bucket goes through a full one, and
		// leaves it in debt.
		time.Sleep(time.Second)
		if got := commit(150); got != codes.OK {
			t.Fatalf("150 writes on a full 100 bucket: %v, want OK", got)
		}
		time.Sleep(590 * time.Millisecond) // 50 in debt + 9 refilled
		if got := commit(10); got != codes.ResourceExhausted {
			t.Fatalf("10 writes 590 ms after 50 of debt: %v", got)
		}
		time.Sleep(20 * time.Millisecond)
		if got := commit(10); got != codes.OK {
			t.Fatalf("10 writes 610 ms after 50 of debt: %v", got)
		}
		// A commit larger than the bucket is refused when it is not full.
		if got := commit(150); got != codes.ResourceExhausted {
			t.Fatalf("150 writes on a nearly empty bucket: %v", got)
		}
		// At t0+2s the rate doubles: 1 + 29 tokens by then, 42 more in
		// the 210 ms since at 200/s.
		time.Sleep(500 * time.Millisecond)
		if got := commit(70); got != codes.OK {
			t.Fatalf("70 writes with 72 tokens: %v", got)
		}
		if got := commit(3); got != codes.ResourceExhausted {
			t.Fatalf("3 writes with 2 tokens: %v", got)
		}
		s := c.snapshot()
		if s.Rejected[CauseRamp] != 6 || s.Codes[codes.ResourceExhausted] != 6 || s.Accepted != 14 || s.Commits != 20 {
			t.Errorf("stats = %+v, want 6 ramp refusals of 20 commits, 14 accepted", s)
		}
		if s.RampWrites != 100+10+150+10+70 || s.Writes != s.RampWrites {
			t.Errorf("RampWrites = %d, Writes = %d, want 340 both", s.RampWrites, s.Writes)
		}
		// [t0+1.1s, t0+2.1s) holds the 150 and the 10 at 1.71s.
		if s.PeakRampWrites != 160 {
			t.Errorf("PeakRampWrites = %d, want 160", s.PeakRampWrites)
		}
		if got := c.rampW.perSecond(); !slices.Equal(got, []int{110, 160, 70}) {
			t.Errorf("perSecond = %v, want [110 160 70]", got)
		}
	})
}

func TestRampGrowthRefills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCore(Config{Ramp: Ramp{Start: 10, Growth: 2, Every: time.Second}}, time.Now())
		accepted := 0
		// A client asking for 1 write every ms for 3.5 s gets the budget:
		// 10 (bucket) + 10 + 20 + 40 + 80/2 = 120.
		for range 3500 {
			if v := c.decide(districts(accepted, 1), time.Now()); v.forward {
				c.applied(districts(accepted, 1), time.Now(), true)
				accepted++
			}
			time.Sleep(time.Millisecond)
		}
		if accepted < 118 || accepted > 122 {
			t.Errorf("accepted %d writes in 3.5 s of a 10/100%%/1s ramp, want ~120", accepted)
		}
		if r := c.ramp.rateAt(time.Now()); r != 80 {
			t.Errorf("rate after 3.5 s = %v, want 80", r)
		}
		if got := c.rampW.perSecond(); len(got) != 4 || got[0] < 19 || got[0] > 21 || got[1] < 19 || got[1] > 21 || got[2] < 39 || got[2] > 41 {
			t.Errorf("perSecond = %v, want [20 20 40 ~40]", got)
		}
	})
}

func TestWindow(t *testing.T) {
	var w window
	ms := time.Millisecond
	w.add(1000*ms, 4)
	w.add(0, 5)
	w.add(999*ms+500*time.Microsecond, 3) // to the ms: 999
	w.add(2500*ms, 1)
	w.add(2999*ms, 2)
	w.add(3000*ms, 7)
	w.add(3000*ms, 1) // merged
	if len(w.ev) != 6 {
		t.Errorf("events = %v, want 6 (same ms merged)", w.ev)
	}
	// [0,1000) = 8; [999,1999) = 7; [2500,3500) = 11; [2999,3999) = 10.
	if got := w.peak(time.Second); got != 11 {
		t.Errorf("peak = %d, want 11", got)
	}
	// [0,2000) = 12; [999,2999) = 8; [1000,3000) = 7; [2500,4500) = 11.
	if got := w.peak(2 * time.Second); got != 12 {
		t.Errorf("peak over 2 s = %d, want 12", got)
	}
	if got := w.perSecond(); !slices.Equal(got, []int{8, 4, 3, 8}) {
		t.Errorf("perSecond = %v, want [8 4 3 8]", got)
	}
	var empty window
	if empty.peak(time.Second) != 0 || empty.perSecond() != nil {
		t.Error("an empty window has a peak or seconds")
	}
}

func TestDocumentRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCore(Config{DocRate: 1, DocBurst: 2}, time.Now())
		a, b := one("locks/a"), one("locks/b")
		for i, want := range []codes.Code{codes.OK, codes.OK, codes.Aborted} {
			v := c.decide(a, time.Now())
			if codeOf(v) != want {
				t.Fatalf("write %d to a: %v, want %v", i, v.err, want)
			}
			if v.forward {
				c.applied(a, time.Now(), true)
			}
		}
		if v := c.decide(a, time.Now()); status.Convert(v.err).Message() != ContentionMessage {
			t.Errorf("refusal = %v, want %q", v.err, ContentionMessage)
		}
		if v := c.decide(b, time.Now()); codeOf(v) != codes.OK {
			t.Errorf("write to b while a is hot: %v", v.err)
		}
		// An update and a transform of one document in one commit are
		// one write of it.
		time.Sleep(999 * time.Millisecond)
		if v := c.decide(append(a, a...), time.Now()); codeOf(v) != codes.Aborted {
			t.Errorf("write to a after 999 ms: %v, want Aborted", v.err)
		}
		time.Sleep(time.Millisecond)
		v := c.decide(append(a, a...), time.Now())
		if codeOf(v) != codes.OK {
			t.Errorf("update+transform of a after 1 s: %v, want OK", v.err)
		}
		c.applied(append(a, a...), time.Now(), true)
		s := c.snapshot()
		if d := s.Docs[docs+"locks/a"]; d.Writes != 4 || d.Peak1s != 2 {
			t.Errorf("stats of a = %+v, want 4 writes, peak 2", d)
		}
		if _, ok := s.Docs[docs+"locks/b"]; ok {
			t.Error("b has stats, but its write was never applied")
		}
		if s.Rejected[CauseDocumentRate] != 3 || s.Codes[codes.Aborted] != 3 {
			t.Errorf("Rejected = %v, Codes = %v, want 3 document-rate refusals", s.Rejected, s.Codes)
		}
	})
}

// TestDecideOrder: faults come before the document rate, which comes
// before the ramp; a refusal spends no tokens anywhere.
func TestDecideOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now
		c := newCore(Config{DocRate: 1, Ramp: Ramp{Collection: "districts", Start: 2}}, now())
		d := districts(0, 1)
		id := c.inject(Fault{Code: codes.Unavailable}, now())
		if v := c.decide(d, now()); codeOf(v) != codes.Unavailable || v.forward || v.cause != CauseInjected {
			t.Fatalf("with a fault: %+v", v)
		}
		c.cancel(id)
		if v := c.decide(d, now()); codeOf(v) != codes.OK { // spends d's token and 1 of the ramp's 2
			t.Fatalf("after cancel: %v", v.err)
		}
		if v := c.decide(d, now()); v.cause != CauseDocumentRate {
			t.Fatalf("d again: %+v, want a document-rate refusal", v)
		}
		// The ramp still has its second token: the refusal spent none.
		if v := c.decide(districts(1, 1), now()); codeOf(v) != codes.OK {
			t.Fatalf("second district: %v", v.err)
		}
		// The ramp is empty: a refusal by it leaves d2's token.
		d2 := districts(2, 1)
		if v := c.decide(d2, now()); v.cause != CauseRamp || codeOf(v) != codes.ResourceExhausted {
			t.Fatalf("third district: %+v, want a ramp refusal", v)
		}
		time.Sleep(500 * time.Millisecond) // one ramp token
		if v := c.decide(d2, now()); codeOf(v) != codes.OK {
			t.Fatalf("third district, retried: %v", v.err)
		}
		// An applied fault forwards and spends, even beyond the budget.
		c.inject(Fault{Code: codes.DeadlineExceeded, Applied: true}, now())
		v := c.decide(districts(3, 1), now())
		if !v.forward || codeOf(v) != codes.DeadlineExceeded || status.Convert(v.err).Message() != DeadlineMessage {
			t.Fatalf("applied fault: %+v", v)
		}
		if tok := c.ramp.lim.TokensAt(now()); tok != -1 {
			t.Errorf("ramp tokens after an applied fault on an empty bucket = %v, want -1", tok)
		}
	})
}

func TestFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCore(Config{}, time.Now())
		d, other := districts(0, 1), one("other/x")
		c.inject(Fault{Code: codes.ResourceExhausted, Collection: "districts", For: time.Second}, time.Now())
		if v := c.decide(other, time.Now()); codeOf(v) != codes.OK {
			t.Errorf("other collection: %v", v.err)
		}
		if v := c.decide(d, time.Now()); codeOf(v) != codes.ResourceExhausted || status.Convert(v.err).Message() != QuotaMessage {
			t.Errorf("districts: %v", v.err)
		}
		time.Sleep(999 * time.Millisecond)
		if v := c.decide(d, time.Now()); codeOf(v) != codes.ResourceExhausted {
			t.Errorf("districts after 999 ms: %v", v.err)
		}
		time.Sleep(time.Millisecond)
		if v := c.decide(d, time.Now()); codeOf(v) != codes.OK {
			t.Errorf("districts after For: %v", v.err)
		}
		if len(c.faults) != 0 {
			t.Errorf("expired fault kept: %v", c.faults)
		}
		// Probability, with a seeded source; a custom message.
		c.rand = rand.New(rand.NewPCG(1, 2)).Float64
		id := c.inject(Fault{Code: codes.Aborted, Probability: 0.3, Message: "nope"}, time.Now())
		failed := 0
		for range 1000 {
			if v := c.decide(d, time.Now()); v.err != nil {
				failed++
				if status.Convert(v.err).Message() != "nope" {
					t.Fatalf("message = %q", status.Convert(v.err).Message())
				}
			}
		}
		if failed < 250 || failed > 350 {
			t.Errorf("%d of 1000 commits failed at probability 0.3", failed)
		}
		c.cancel(id)
		c.cancel(id)
		if v := c.decide(d, time.Now()); v.err != nil {
			t.Errorf("after cancel: %v", v.err)
		}
		s := c.snapshot()
		if s.Rejected[CauseInjected] != failed+2 || s.Codes[codes.Aborted] != failed || s.Codes[codes.ResourceExhausted] != 2 {
			t.Errorf("Rejected = %v, Codes = %v", s.Rejected, s.Codes)
		}
	})
}

func TestMessages(t *testing.T) {
	for code, want := range map[codes.Code]string{
		codes.ResourceExhausted: "Quota exceeded.",
		codes.Aborted:           "Too much contention on these documents. Please try again.",
		codes.DeadlineExceeded:  "Deadline exceeded.",
		codes.Unavailable:       "The service is currently unavailable.",
		codes.Internal:          "Internal",
	} {
		if got := message(code); got != want {
			t.Errorf("message(%v) = %q, want %q", code, got, want)
		}
	}
}

// hold (Proxy.SetRate) holds the budget at a rate whatever the schedule,
// its bucket one second of it, and 0 returns it to the schedule.
func TestRampHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCore(Config{Ramp: Ramp{Collection: "districts", Start: 100, Growth: 2, Every: 10 * time.Second}}, time.Now())
		next := 0
		commit := func(n int) codes.Code {
			v := c.decide(districts(next, n), time.Now())
			next += n
			return codeOf(v)
		}
		if got := commit(10); got != codes.OK { // starts the ramp
			t.Fatalf("first commit: %v", got)
		}
		c.ramp.hold(time.Now(), 20)
		if got := c.ramp.rateAt(time.Now()); got != 20 {
			t.Fatalf("held rate %v, want 20", got)
		}
		// The bucket holds one second of 20: what it had is capped there.
		time.Sleep(time.Second)
		if commit(20) != codes.OK || commit(1) != codes.ResourceExhausted {
			t.Error("a held bucket: want 20 writes taken a second, then a refusal")
		}
		// The schedule's steps do not lift a hold.
		time.Sleep(20 * time.Second)
		if got := c.ramp.rateAt(time.Now()); got != 20 {
			t.Errorf("held rate after two steps of the schedule %v, want 20", got)
		}
		c.ramp.hold(time.Now(), 0)
		if got := c.ramp.rateAt(time.Now()); got != 400 {
			t.Errorf("rate after the hold ends %v, want the schedule's 400", got)
		}
	})
}
