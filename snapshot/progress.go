package snapshot

import "sync/atomic"

// Progress follows a write or repair district by district: Add(n) says n
// more of the input's districts are stored. A *progressbar.ProgressBar is
// one. Its total is the input's district count: a complete write or
// repair adds up to it (a repair counts the districts it keeps as they are
// stored, a complete snapshot left alone counts them all), a partial one
// stops short by the districts not written. Stale district documents a
// write deletes are not counted.
//
// Add is called from a goroutine of the write's own, never from a chunk's:
// the chunks only count, so that a slow Add (a terminal that does not keep
// up) delays the display, not a commit. Counts that pile up meanwhile come
// in one Add. One write's Adds come one at a time, and all of them have
// returned before its Write or Repair does; writes run at once on one
// Writer call Add at once. Add's error is ignored.
type Progress interface {
	Add(n int) error
}

// WithProgress makes Write and Repair tell p how many districts are stored
// as their chunks commit (nil: no one, the default). See Progress.
func WithProgress(p Progress) Option { return func(c *config) { c.progress = p } }

// progressFeed passes a job's district counts to its Progress: a chunk
// adds to an atomic counter and wakes the feed's goroutine without
// waiting, and the goroutine passes on what was added since its last Add.
// A nil *progressFeed (no Progress) counts nothing.
type progressFeed struct {
	p    Progress
	done atomic.Int64
	wake chan struct{} // one pending wake-up at most: the chunks never wait
	quit chan struct{} // closed by stop
	gone chan struct{} // closed when the goroutine has made its last Add
}

// startProgress starts a feed to p, or returns nil when p is nil.
func startProgress(p Progress) *progressFeed {
	if p == nil {
		return nil
	}
	f := &progressFeed{p: p, wake: make(chan struct{}, 1), quit: make(chan struct{}), gone: make(chan struct{})}
	go f.run()
	return f
}

// add counts n more districts stored; it never blocks.
func (f *progressFeed) add(n int) {
	if f == nil || n <= 0 {
		return
	}
	f.done.Add(int64(n))
	f.poke()
}

// settle raises the count to n: what the job's Result says is stored, which
// a finish that decided chunks of unknown outcome can make more than the
// chunks counted.
func (f *progressFeed) settle(n int) {
	if f == nil {
		return
	}
	for {
		cur := f.done.Load()
		if int64(n) <= cur {
			return
		}
		if f.done.CompareAndSwap(cur, int64(n)) {
			f.poke()
			return
		}
	}
}

func (f *progressFeed) poke() {
	select {
	case f.wake <- struct{}{}:
	default: // a wake-up is pending: it will see this count too
	}
}

// stop passes on the last count and waits for the goroutine's last Add.
func (f *progressFeed) stop() {
	if f == nil {
		return
	}
	close(f.quit)
	<-f.gone
}

func (f *progressFeed) run() {
	defer close(f.gone)
	var sent int64
	pass := func() {
		if d := f.done.Load(); d > sent {
			_ = f.p.Add(int(d - sent))
			sent = d
		}
	}
	for {
		select {
		case <-f.wake:
			pass()
		case <-f.quit:
			pass()
			return
		}
	}
}

// progressDone is how many of the input's districts res, the job's
// Result, says are stored: all of them when the snapshot was complete and
// left alone.
func (j *job) progressDone(res *Result) int {
	switch {
	case res == nil:
		return 0
	case res.Outcome == OutcomeSkipped:
		return len(j.in.Snap.Payload.Districts)
	}
	return res.DistrictsWritten + res.DistrictsKept
}
