package fsproxy

import (
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Firestore's messages for the statuses the proxy answers with.
const (
	// ContentionMessage is Firestore's ABORTED message for a document
	// written (or locked) faster than it takes.
	ContentionMessage = "Too much contention on these documents. Please try again."
	// QuotaMessage is Firestore's RESOURCE_EXHAUSTED message, which it
	// also gives for writes to a new key range beyond its ramp.
	QuotaMessage = "Quota exceeded."
	// DeadlineMessage is Firestore's DEADLINE_EXCEEDED message.
	DeadlineMessage = "Deadline exceeded."
	// UnavailableMessage is Firestore's usual UNAVAILABLE message.
	UnavailableMessage = "The service is currently unavailable."
)

// Causes of a refusal, as Stats.Rejected counts them.
const (
	CauseInjected     = "injected"
	CauseDocumentRate = "document-rate"
	CauseRamp         = "ramp"
)

// message is Firestore's usual message for code.
func message(code codes.Code) string {
	switch code {
	case codes.ResourceExhausted:
		return QuotaMessage
	case codes.Aborted:
		return ContentionMessage
	case codes.DeadlineExceeded:
		return DeadlineMessage
	case codes.Unavailable:
		return UnavailableMessage
	}
	return code.String()
}

// write is one document write of a commit.
type write struct {
	doc        string // the document's full resource name
	collection string // its parent collection id
}

// writesOf lists the documents req's writes touch (update, delete,
// transform), one entry a write, in order.
func writesOf(req *firestorepb.CommitRequest) []write {
	var ws []write
	for _, w := range req.GetWrites() {
		var doc string
		switch op := w.GetOperation().(type) {
		case *firestorepb.Write_Update:
			doc = op.Update.GetName()
		case *firestorepb.Write_Delete:
			doc = op.Delete
		case *firestorepb.Write_Transform:
			doc = op.Transform.GetDocument()
		default:
			continue
		}
		ws = append(ws, write{doc: doc, collection: collectionID(doc)})
	}
	return ws
}

// collectionID is the id of the collection a document name
// (projects/p/databases/d/documents/c/id/…/c/id) is in: its second-last
// path segment.
func collectionID(doc string) string {
	i := strings.LastIndexByte(doc, '/')
	if i < 0 {
		return ""
	}
	parent := doc[:i]
	return parent[strings.LastIndexByte(parent, '/')+1:]
}

// ramp is the budget of a Ramp: a token bucket whose rate steps up on
// schedule from the first write it counts.
type ramp struct {
	cfg     Ramp // defaults filled in
	started bool
	t0      time.Time
	step    int64 // the step the bucket is at
	lim     *rate.Limiter
	// held, when positive, is the rate SetRate holds the budget at,
	// whatever the schedule says.
	held float64
}

func newRamp(cfg Ramp) *ramp {
	if cfg.Growth == 0 {
		cfg.Growth = 1.5
	}
	if cfg.Every == 0 {
		cfg.Every = 5 * time.Minute
	}
	return &ramp{cfg: cfg}
}

// on reports whether the ramp budgets anything.
func (r *ramp) on() bool { return r.cfg.Start > 0 }

// counts reports whether the ramp counts a write w.
func (r *ramp) counts(w write) bool {
	return r.on() && (r.cfg.Collection == "" || w.collection == r.cfg.Collection)
}

// rateAt is the budget at t in writes/s: 0 before the first counted
// write, else Start×Growth^(steps since it), at most Max, or the rate
// hold set.
func (r *ramp) rateAt(t time.Time) float64 {
	if !r.on() || !r.started {
		return 0
	}
	if r.held > 0 {
		return r.held
	}
	return r.rateOf(r.stepAt(t))
}

// hold holds the budget at v writes/s from t on (its bucket one second of
// v, the tokens it holds kept up to that), or, with v 0, returns it to
// the schedule: a store whose capacity drops and recovers.
func (r *ramp) hold(t time.Time, v float64) {
	r.advance(t)
	r.held = v
	if v <= 0 {
		v = r.rateOf(r.stepAt(t))
	}
	r.lim.SetLimitAt(t, rate.Limit(v))
	r.lim.SetBurstAt(t, capacity(v))
}

// stepAt is how many steps of Every have passed at t.
func (r *ramp) stepAt(t time.Time) int64 {
	return max(int64(t.Sub(r.t0)/r.cfg.Every), 0)
}

// rateOf is the budget in step k.
func (r *ramp) rateOf(k int64) float64 {
	v := r.cfg.Start * math.Pow(r.cfg.Growth, float64(k))
	if r.cfg.Max > 0 && v > r.cfg.Max {
		v = r.cfg.Max
	}
	return v
}

// capacity is the bucket's size at rate v: one second of it.
func capacity(v float64) int {
	return int(min(math.Ceil(v), 1<<30))
}

// advance starts the ramp's clock at t if it has not started, and brings
// the bucket to the step t is in, changing its rate and capacity at each
// step's start, so that tokens refill at each step's own rate.
func (r *ramp) advance(t time.Time) {
	if !r.started {
		r.started, r.t0 = true, t
		r.lim = rate.NewLimiter(rate.Limit(r.rateOf(0)), capacity(r.rateOf(0)))
		return
	}
	if r.held > 0 {
		r.step = r.stepAt(t)
		return
	}
	for k := r.step + 1; k <= r.stepAt(t); k++ {
		v := r.rateOf(k)
		if v == r.rateOf(k-1) { // at Max: no more steps
			r.step = r.stepAt(t)
			break
		}
		at := r.t0.Add(time.Duration(k) * r.cfg.Every)
		r.lim.SetLimitAt(at, rate.Limit(v))
		r.lim.SetBurstAt(at, capacity(v))
		r.step = k
	}
}

// take spends n tokens at t and reports whether they were there. A
// commit larger than the bucket goes through when the bucket is full and
// leaves it in debt. force spends them whether or not they are there (a
// commit the store applied anyway).
func (r *ramp) take(t time.Time, n int, force bool) bool {
	if n == 0 {
		return true
	}
	r.advance(t)
	b := r.lim.Burst()
	if n <= b {
		if force {
			r.lim.ReserveN(t, n)
			return true
		}
		return r.lim.AllowN(t, n)
	}
	if !force && r.lim.TokensAt(t) < float64(b) {
		return false
	}
	// rate.Limiter refuses more than its burst at once: widen it for this
	// one reservation, which leaves the tokens negative.
	r.lim.SetBurstAt(t, n)
	r.lim.ReserveN(t, n)
	r.lim.SetBurstAt(t, b)
	return true
}

// window counts events in time to find the most in any one second. Its
// events are kept in time order, merged to the millisecond, so it holds
// at most 1,000 a second of traffic.
type window struct {
	ev []event
}

// event is n writes at a moment (since the core's base, to the ms).
type event struct {
	at time.Duration
	n  int
}

// add records n writes at at.
func (w *window) add(at time.Duration, n int) {
	at = at.Truncate(time.Millisecond)
	i := len(w.ev)
	for i > 0 && w.ev[i-1].at > at {
		i--
	}
	if i > 0 && w.ev[i-1].at == at {
		w.ev[i-1].n += n
		return
	}
	w.ev = append(w.ev, event{})
	copy(w.ev[i+1:], w.ev[i:])
	w.ev[i] = event{at: at, n: n}
}

// peak is the most writes in any window [s, s+d).
func (w *window) peak(d time.Duration) int {
	best, sum, lo := 0, 0, 0
	for _, e := range w.ev {
		sum += e.n
		for w.ev[lo].at <= e.at-d {
			sum -= w.ev[lo].n
			lo++
		}
		best = max(best, sum)
	}
	return best
}

// perSecond is the writes in each whole second since the first.
func (w *window) perSecond() []int {
	if len(w.ev) == 0 {
		return nil
	}
	first := w.ev[0].at
	out := make([]int, int((w.ev[len(w.ev)-1].at-first)/time.Second)+1)
	for _, e := range w.ev {
		out[(e.at-first)/time.Second] += e.n
	}
	return out
}

// fault is an injected Fault with its expiry.
type fault struct {
	Fault
	id    int
	until time.Time // zero: until cancelled
}

// docState is what the core keeps per document.
type docState struct {
	lim         *rate.Limiter // nil without a DocRate
	writes      int
	first, last time.Time
	win         window
}

// verdict is the core's decision on a commit.
type verdict struct {
	err     error // the refusal, or the injected error of an applied fault
	forward bool  // forward the commit to the target
	cause   string
}

// core decides on commits and keeps the statistics. It holds no lock of
// its own and reads no clock: the Proxy serialises calls and passes the
// time, so it is tested without a network, in a synctest bubble.
type core struct {
	cfg    Config
	base   time.Time
	ramp   *ramp
	faults []*fault
	nextID int
	docs   map[string]*docState
	rampW  window
	stats  Stats
	rand   func() float64
}

func newCore(cfg Config, now time.Time) *core {
	return &core{
		cfg:  cfg,
		base: now,
		ramp: newRamp(cfg.Ramp),
		docs: map[string]*docState{},
		stats: Stats{
			Rejected: map[string]int{},
			Codes:    map[codes.Code]int{},
		},
		rand: rand.Float64,
	}
}

// inject adds f at now and returns its id.
func (c *core) inject(f Fault, now time.Time) int {
	c.nextID++
	ff := &fault{Fault: f, id: c.nextID}
	if f.For > 0 {
		ff.until = now.Add(f.For)
	}
	c.faults = append(c.faults, ff)
	return ff.id
}

// cancel removes the fault id, if it is still there.
func (c *core) cancel(id int) {
	for i, f := range c.faults {
		if f.id == id {
			c.faults = append(c.faults[:i], c.faults[i+1:]...)
			return
		}
	}
}

// injected returns the first live fault that matches a commit of ws and
// whose dice roll says it strikes, dropping expired ones.
func (c *core) injected(ws []write, now time.Time) *fault {
	live := c.faults[:0]
	for _, f := range c.faults {
		if f.until.IsZero() || now.Before(f.until) {
			live = append(live, f)
		}
	}
	clear(c.faults[len(live):])
	c.faults = live
	for _, f := range c.faults {
		if f.Collection != "" && !writesTo(ws, f.Collection) {
			continue
		}
		if f.Probability > 0 && f.Probability < 1 && c.rand() >= f.Probability {
			continue
		}
		return f
	}
	return nil
}

func writesTo(ws []write, collection string) bool {
	for _, w := range ws {
		if w.collection == collection {
			return true
		}
	}
	return false
}

// doc returns the state of the document name, made on first use.
func (c *core) doc(name string) *docState {
	d := c.docs[name]
	if d == nil {
		d = &docState{}
		if c.cfg.DocRate > 0 {
			d.lim = rate.NewLimiter(rate.Limit(c.cfg.DocRate), max(c.cfg.DocBurst, 1))
		}
		c.docs[name] = d
	}
	return d
}

// decide rules on a commit of ws at now: injected faults first, then the
// per-document rate, then the ramp. A refusal spends no tokens.
func (c *core) decide(ws []write, now time.Time) verdict {
	c.stats.Commits++
	counted := 0
	for _, w := range ws {
		if c.ramp.counts(w) {
			counted++
		}
	}
	// A commit writes each of its documents once, however many of its
	// writes name it (an update and a transform of one document).
	var docs []*docState
	if c.cfg.DocRate > 0 {
		seen := map[string]bool{}
		for _, w := range ws {
			if !seen[w.doc] {
				seen[w.doc] = true
				docs = append(docs, c.doc(w.doc))
			}
		}
	}
	if f := c.injected(ws, now); f != nil {
		msg := f.Message
		if msg == "" {
			msg = message(f.Code)
		}
		c.refused(CauseInjected, f.Code)
		v := verdict{err: status.Error(f.Code, msg), cause: CauseInjected}
		if f.Applied {
			// The store takes the writes: they cost what any write costs.
			v.forward = true
			for _, d := range docs {
				d.lim.ReserveN(now, 1)
			}
			c.ramp.take(now, counted, true)
		}
		return v
	}
	for _, d := range docs {
		if d.lim.TokensAt(now) < 1 {
			c.refused(CauseDocumentRate, codes.Aborted)
			return verdict{err: status.Error(codes.Aborted, ContentionMessage), cause: CauseDocumentRate}
		}
	}
	if !c.ramp.take(now, counted, false) {
		c.refused(CauseRamp, codes.ResourceExhausted)
		return verdict{err: status.Error(codes.ResourceExhausted, QuotaMessage), cause: CauseRamp}
	}
	for _, d := range docs {
		d.lim.AllowN(now, 1)
	}
	return verdict{forward: true}
}

func (c *core) refused(cause string, code codes.Code) {
	c.stats.Rejected[cause]++
	c.stats.Codes[code]++
}

// applied records a forwarded commit of ws, decided at at, by the
// target's answer: ok, or an error.
func (c *core) applied(ws []write, at time.Time, ok bool) {
	if !ok {
		c.stats.Failed++
		return
	}
	c.stats.Accepted++
	c.stats.Writes += len(ws)
	since := at.Sub(c.base)
	counted := 0
	for _, w := range ws {
		if c.ramp.counts(w) {
			counted++
		}
		d := c.doc(w.doc)
		d.writes++
		if d.first.IsZero() || at.Before(d.first) {
			d.first = at
		}
		if at.After(d.last) {
			d.last = at
		}
		d.win.add(since, 1)
	}
	if counted > 0 {
		c.stats.RampWrites += counted
		c.rampW.add(since, counted)
	}
}

// snapshot copies the statistics.
func (c *core) snapshot() Stats {
	s := c.stats
	s.Rejected = make(map[string]int, len(c.stats.Rejected))
	for k, v := range c.stats.Rejected {
		s.Rejected[k] = v
	}
	s.Codes = make(map[codes.Code]int, len(c.stats.Codes))
	for k, v := range c.stats.Codes {
		s.Codes[k] = v
	}
	s.PeakRampWrites = c.rampW.peak(time.Second)
	s.Docs = map[string]DocStats{}
	for name, d := range c.docs {
		if d.writes == 0 {
			continue
		}
		s.Docs[name] = DocStats{Writes: d.writes, Peak1s: d.win.peak(time.Second), First: d.first, Last: d.last}
	}
	return s
}
