//go:build chaos

package chaos

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

const (
	// bigSnapshot is the size for the crash scenarios.
	bigSnapshot = 2000
	// shortTTL is the killed writers' --lock-ttl, so the suite waits 5 s
	// for a dead writer's lock instead of the default 30 s.
	shortTTL = 5 * time.Second
	// liveness is how long after its expiry a lock still counts as live
	// (locking.TimeTolerance), plus scheduling slack.
	liveness = 1500 * time.Millisecond
	// writeLimit bounds a writer of a big snapshot, which may have to wait
	// up to 60 s for the emulator to drop a transaction a dead writer left
	// open, then write 2,000 districts on an emulator other scenarios share.
	writeLimit = 180 * time.Second
)

// chunks is how many district chunks a write of n districts has.
func chunks(n int) int { return (n + 49) / 50 }

// afterChunks returns a matcher for the moment the k-th district chunk was
// committed.
func afterChunks(k int) func(logEntry) bool {
	n := 0
	return func(e logEntry) bool {
		if chunkCommitted(e) {
			n++
			return n == k
		}
		return false
	}
}

// waitSignalled waits until sig was sent to p (by its onLine hook) or p
// ended; it reports when it was sent.
func waitSignalled(p *proc, sig syscall.Signal, timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if at := p.signalledAt(sig); !at.IsZero() {
			return at, true
		}
		select {
		case <-p.done:
			at := p.signalledAt(sig)
			return at, !at.IsZero()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return time.Time{}, false
}

// Scenario 1: a writer SIGKILLed at four moments. After its lock's TTL,
// (a) the same write again and (b), on a project of its own killed the
// same way, `repair` exit 0, and both end with get == input, an exact
// manifest and no lock left.
func TestSIGKILL(t *testing.T) {
	t.Parallel()
	in := generated(t, day, bigSnapshot, 1)
	moments := []struct {
		name  string
		match func() func(logEntry) bool
	}{
		{"lock acquired", func() func(logEntry) bool {
			return func(e logEntry) bool { return e.Message == "snapshot lock acquired" }
		}},
		{"root committed", func() func(logEntry) bool {
			return func(e logEntry) bool { return e.Message == "batch committed" && e.BatchIndex == 0 }
		}},
		{fmt.Sprintf("%d of %d chunks", chunks(bigSnapshot)/3, chunks(bigSnapshot)), func() func(logEntry) bool {
			return afterChunks(chunks(bigSnapshot) / 3)
		}},
		{"recording the manifest", func() func(logEntry) bool {
			return func(e logEntry) bool { return e.Message == "recording the manifest" }
		}},
	}
	for i, m := range moments {
		for _, next := range []string{"rerun", "repair"} {
			t.Run(fmt.Sprintf("%d-%s/%s", i+1, m.name, next), func(t *testing.T) {
				t.Parallel()
				s := newScenario(t, fmt.Sprintf("1%c. SIGKILL after %q, then %s", 'a'+i, m.name, next))
				match := m.match()
				w := s.start(procSpec{name: "write", host: s.viaProxy(), limit: writeLimit,
					args: []string{"write", "--input", in.path, "--lock-ttl", shortTTL.String()},
					onLine: func(p *proc, e logEntry) {
						if match(e) {
							p.signal(syscall.SIGKILL)
						}
					}})
				s.killed(w, fmt.Sprintf("%q was logged", m.name))
				killedAt := w.signalledAt(syscall.SIGKILL)
				after := s.read()
				t.Logf("after the kill: %s", after)
				if after.rootExists {
					// A killed writer's root says exactly what is stored.
					s.checkManifest(after, manifestOpts{})
				}
				if m.name == "recording the manifest" && after.rootExists && after.writeState == "finished" {
					s.note("the finish landed before the kill")
				}

				// The lock expires at most a TTL after the kill (its last
				// extension was before it).
				sleepUntil(killedAt.Add(shortTTL + liveness))
				var r *proc
				if next == "rerun" {
					r = s.start(procSpec{name: "rerun", host: s.viaProxy(), limit: writeLimit,
						args: []string{"write", "--input", in.path, "--lock-ttl", shortTTL.String()}})
				} else {
					r = s.start(procSpec{name: "repair", host: s.viaProxy(), limit: writeLimit,
						args: []string{"repair", "--date", day, "--input", in.path}})
				}
				if s.exited(r, 0) {
					s.recovered(r.endedAt().Sub(killedAt))
				}
				o := manifestOpts{}
				if next == "repair" {
					o.repairedFrom = []string{w.fence()}
				}
				s.checkFinal(in, o)
			})
		}
	}
}

// Scenario 2: a writer SIGSTOPped mid-chunk past its TTL; a second writer
// with other content takes over and exits 0; the first, continued, exits 5
// and writes nothing: the root and every district document carry the
// second writer's fence, and get returns the second writer's input.
func TestSIGSTOP(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "2. SIGSTOP mid-chunk past the TTL; a second writer; SIGCONT")
	first := generated(t, day, bigSnapshot, 1)
	second := generated(t, day, bigSnapshot, 2)
	match := afterChunks(chunks(bigSnapshot) / 3)
	w1 := s.start(procSpec{name: "writer 1", host: s.viaProxy(), limit: 10 * time.Minute,
		args: []string{"write", "--input", first.path, "--lock-ttl", shortTTL.String()},
		onLine: func(p *proc, e logEntry) {
			if match(e) {
				p.signal(syscall.SIGSTOP)
			}
		}})
	stoppedAt, ok := waitSignalled(w1, syscall.SIGSTOP, writeLimit)
	if !ok {
		s.exited(w1) // records it; fails
		t.Fatalf("writer 1 was never stopped\n%s", w1.describe())
	}
	sleepUntil(stoppedAt.Add(shortTTL + liveness))

	w2 := s.start(procSpec{name: "writer 2", host: s.direct(), limit: writeLimit,
		args: []string{"write", "--input", second.path}})
	if s.exited(w2, 0) {
		s.recovered(w2.endedAt().Sub(stoppedAt))
	}
	st := s.checkFinal(second, manifestOpts{})
	s.checkAllFence(st, w2.fence(), "writer 2")

	w1.extendLimit(hardLimit)
	w1.signal(syscall.SIGCONT)
	s.exited(w1, 5)
	// Whatever writer 1 had in flight has reached the emulator by now.
	time.Sleep(2 * time.Second)
	t.Log("after writer 1 ended:")
	st = s.checkFinal(second, manifestOpts{})
	s.checkAllFence(st, w2.fence(), "writer 2")
}
