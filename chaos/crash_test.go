//go:build chaos

package chaos

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/protobuf/proto"
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

// Scenario 1: a writer SIGKILLed at four moments. Right after the kill
// the root never over-claims: every district it records as written has
// its document; while it says writing it may under-claim (districts
// written but not yet recorded, counted in the row's note). After its
// lock's TTL, (a) the same write again (--json) and (b), on a project of
// its own killed the same way, `repair --json` exit 0, and both record
// without rewriting: every district document present after the kill,
// recorded or not, still carries the killed writer's fence — unless the
// kill came after a finish that recorded the write complete, which a
// rerun writes again whole. Both end with get == input, an exact
// manifest and no lock left.
func TestSIGKILL(t *testing.T) {
	t.Parallel()
	in := leanGenerated(t, day, bigSnapshot, 1)
	moments := []struct {
		name  string
		match func() func(logEntry) bool
		// hold, if set, is what the proxy holds up: the writer is
		// killed once it is held instead of at a log line, which a
		// writer about to exit could outrun.
		hold func([]byte) bool
	}{
		{"lock acquired", func() func(logEntry) bool {
			return func(e logEntry) bool { return e.Message == "snapshot lock acquired" }
		}, nil},
		{"root committed", func() func(logEntry) bool {
			return func(e logEntry) bool { return e.Message == "batch committed" && e.BatchIndex == 0 }
		}, nil},
		{fmt.Sprintf("%d of %d chunks", chunks(bigSnapshot)/3, chunks(bigSnapshot)), func() func(logEntry) bool {
			return afterChunks(chunks(bigSnapshot) / 3)
		}, nil},
		{"recording the manifest", func() func(logEntry) bool {
			return func(e logEntry) bool { return e.Message == "recording the manifest" }
		}, nil},
		// After the finish recorded the write complete, inside the
		// lock's release (its commit held, its read taken: the lock
		// document stays locked until Firestore expires the
		// transaction): a rerun writes it all again, a repair nothing.
		// Killed at the log line instead, the writer could release and
		// exit 0 first (CI saw it).
		{"snapshot write finished", nil, releaseCommit},
	}
	for i, m := range moments {
		for _, next := range []string{"rerun", "repair"} {
			t.Run(fmt.Sprintf("%d-%s/%s", i+1, m.name, next), func(t *testing.T) {
				t.Parallel()
				s := newScenario(t, fmt.Sprintf("1%c. SIGKILL after %q, then %s", 'a'+i, m.name, next))
				spec := procSpec{name: "write", host: s.viaProxy(), limit: writeLimit,
					args: []string{"write", "--input", in.path, "--lock-ttl", shortTTL.String()}}
				what := fmt.Sprintf("%q was logged", m.name)
				var held <-chan struct{}
				if m.hold != nil {
					held = s.proxy.HoldUp(m.hold)
					what = "the lock's release was held"
				} else {
					match := m.match()
					spec.onLine = func(p *proc, e logEntry) {
						if match(e) {
							p.signal(syscall.SIGKILL)
						}
					}
				}
				w := s.start(spec)
				if held != nil {
					select {
					case <-held:
						w.signal(syscall.SIGKILL)
					case <-w.done:
					}
				}
				s.killed(w, what)
				killedAt := w.signalledAt(syscall.SIGKILL)
				// The dead writer's connections end here: what it sent
				// and the emulator took is what it wrote.
				s.proxy.ResetAll()
				after := s.read()
				t.Logf("after the kill: %s", after)
				s.afterKill(after, w.fence())
				finished := after.finishedComplete()
				switch {
				case m.name == "recording the manifest" && finished:
					s.note("the finish landed before the kill")
				case m.name == "snapshot write finished" && !finished:
					t.Errorf("killed after %q, yet the root does not record a finished complete write: %s", m.name, after)
				}

				// The lock expires at most a TTL after the kill (its last
				// extension was before it).
				sleepUntil(killedAt.Add(shortTTL + liveness))
				// The rerun and the repair are the operator's next step, with
				// the default TTL: only the killed writer needs a short one
				// (so the suite waits 5 s, not 30 s). A rerun with 5 s may
				// wait out a dead writer's transaction on the root for up to
				// 60 s, and one renewal the shared emulator leaves unanswered
				// for 3 s then loses its lease — a loss the lease rows test,
				// not this one.
				var r *proc
				if next == "rerun" {
					r = s.start(procSpec{name: "rerun", host: s.viaProxy(), limit: writeLimit,
						args: []string{"write", "--input", in.path, "--json"}})
				} else {
					r = s.start(procSpec{name: "repair", host: s.viaProxy(), limit: writeLimit,
						args: []string{"repair", "--date", day, "--input", in.path, "--json"}})
				}
				if s.exited(r, 0) {
					s.recovered(r.endedAt().Sub(killedAt))
				}
				res := s.result(r)
				rewrites := next == "rerun" && finished
				s.logWarnings(r)
				if res != nil {
					s.note("%s: kept %d, wrote %d, %d root commits, lock wait %.1f s, took %.1f s", next, res.DistrictsKept, res.DistrictsWritten,
						res.RootCommits, float64(res.LockWaitMs)/1000, float64(res.TotalDurationMs)/1000)
					// An unfinished root: every intact document is kept
					// (recorded or not), and only the rest is written.
					if after.rootExists && !finished && res.DistrictsKept < len(after.docs) {
						t.Errorf("%s kept %d districts, but %d were stored after the kill (all of this input, intact)", next, res.DistrictsKept, len(after.docs))
					}
					if rewrites && res.DistrictsWritten != bigSnapshot {
						t.Errorf("rerun over a finished complete root wrote %d districts, want all %d", res.DistrictsWritten, bigSnapshot)
					}
				}
				o := manifestOpts{repairedFrom: []string{w.fence()}}
				if rewrites {
					o = manifestOpts{}
				}
				final := s.checkFinal(in, o)
				if rewrites {
					s.checkAllFence(final, r.fence(), "the rerun")
				} else {
					s.checkKept(after, final, w.fence(), next)
				}
			})
		}
	}
}

// afterKill checks what a killed writer (whose fence is fence) left: the
// root never over-claims, says no more than manifestProblems allows, and
// every district document it left carries its fence. It notes how many
// districts are written but not yet recorded.
func (s *scenario) afterKill(after stored, fence string) {
	s.t.Helper()
	if !after.rootExists {
		if len(after.docs) > 0 {
			s.t.Errorf("no root, yet %d district documents after the kill", len(after.docs))
		}
		s.note("no root after the kill")
		return
	}
	if over := overClaims(after); len(over) > 0 {
		s.t.Errorf("over-claimed after the kill: %d districts recorded as written have no document: %s", len(over), firstLines(over, 10))
	}
	s.checkManifest(after, manifestOpts{})
	// The killed writer wrote the root and every document left.
	if bad := fenceProblems(after, fence, "the killed writer"); len(bad) > 0 {
		s.t.Errorf("after the kill:\n%s", strings.Join(bad, "\n"))
	}
	s.note("after the kill: %s, %d documents, %d recorded, %d not yet recorded",
		after.writeState, len(after.docs), after.count("success"), len(notYetRecorded(after)))
}

// checkKept checks that a repair or rerun recorded without rewriting:
// every district document present after the kill is still there and
// still carries the writer's fence it had then.
func (s *scenario) checkKept(after, final stored, fence, who string) {
	s.t.Helper()
	if bad := keptProblems(after, final); len(bad) > 0 {
		s.t.Errorf("%s rewrote or removed %d of the %d district documents the killed writer (fence %s) left:\n%s",
			who, len(bad), len(after.docs), fence, firstLines(bad, 10))
	}
}

// keptProblems lists the district documents of before that after lacks or
// holds under another fence (written again).
func keptProblems(before, after stored) []string {
	var bad []string
	for id, d := range before.docs {
		switch n, ok := after.docs[id]; {
		case !ok:
			bad = append(bad, fmt.Sprintf("district %s: removed", id))
		case n.fence != d.fence:
			bad = append(bad, fmt.Sprintf("district %s: written again (fence %s, was %s)", id, n.fence, d.fence))
		}
	}
	sort.Strings(bad)
	return bad
}

// Scenario 2: a writer SIGSTOPped mid-chunk past its TTL; a second writer
// with other content takes over and exits 0; the first, continued, exits 5
// and writes nothing: the root and every district document carry the
// second writer's fence, and get returns the second writer's input.
func TestSIGSTOP(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "2. SIGSTOP mid-chunk past the TTL; a second writer; SIGCONT")
	first := leanGenerated(t, day, bigSnapshot, 1)
	second := leanGenerated(t, day, bigSnapshot, 2)
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

// extendCommit matches the client-to-server bytes of a lease extension's
// commit on the Firestore lock backend: a write of the lock document's
// expiresAtMs alone (an acquire also writes acquiredAtMs; a release is a
// delete; reads name no fields).
func extendCommit(data []byte) bool {
	return bytes.Contains(data, []byte("/documents/locks/")) && bytes.Contains(data, []byte("expiresAtMs")) &&
		!bytes.Contains(data, []byte("acquiredAtMs"))
}

// releaseCommit matches the client-to-server bytes of a lock release's
// commit on the Firestore lock backend: a gRPC message (uncompressed,
// whole in one frame) that is a CommitRequest deleting a lock document.
// Other requests either fail to parse as one (a read's document name is
// no Write) or delete nothing under locks/.
func releaseCommit(data []byte) bool {
	var req firestorepb.CommitRequest
	if !grpcMessage(data, &req) {
		return false
	}
	for _, w := range req.GetWrites() {
		if strings.Contains(w.GetDelete(), "/documents/locks/") {
			return true
		}
	}
	return false
}

// grpcMessage reports whether data, client-to-server bytes of a DATA
// frame, is one gRPC message (uncompressed, whole in the frame) that
// parses as m, and parses it into m.
func grpcMessage(data []byte, m proto.Message) bool {
	if len(data) < 5 || data[0] != 0 {
		return false
	}
	n := int(binary.BigEndian.Uint32(data[1:5]))
	return len(data) >= 5+n && proto.Unmarshal(data[5:5+n], m) == nil
}

// Scenario 1f: a writer SIGKILLed inside a lease extension: the proxy
// holds the extension's commit, whose read has reached the emulator, so
// the lock document stays locked by a transaction that never ends until
// Firestore expires it (60 s). A rerun started at once takes the lock
// once the lock has expired and that transaction with it, and exits 0
// with get == input; before, its acquire took the ABORTED answers for an
// unreachable store and gave up at --lock-wait + --request-timeout with exit 1.
func TestSIGKILLInsideExtend(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "1f. SIGKILL inside a lease extension (its commit held), then rerun at once")
	in := leanGenerated(t, day, bigSnapshot, 1)
	// Slow enough that the lease extends (every TTL/3) while it writes.
	s.proxy.SetLatency(20 * time.Millisecond)
	held := s.proxy.HoldUp(extendCommit)
	w := s.start(procSpec{name: "write", host: s.viaProxy(), limit: writeLimit,
		args: []string{"write", "--input", in.path, "--lock-ttl", "3s"}})
	select {
	case <-held:
		w.signal(syscall.SIGKILL)
	case <-w.done:
	}
	s.killed(w, "an extension's commit was held")
	killedAt := w.signalledAt(syscall.SIGKILL)
	s.proxy.ResetAll()
	after := s.read()
	t.Logf("after the kill: %s", after)
	s.afterKill(after, w.fence())

	r := s.start(procSpec{name: "rerun", host: s.direct(), limit: writeLimit,
		args: []string{"write", "--input", in.path, "--json"}})
	if s.exited(r, 0) {
		s.recovered(r.endedAt().Sub(killedAt))
	}
	s.logWarnings(r)
	if res := s.result(r); res != nil {
		s.note("rerun: lock wait %.1f s, kept %d, wrote %d, took %.1f s", float64(res.LockWaitMs)/1000,
			res.DistrictsKept, res.DistrictsWritten, float64(res.TotalDurationMs)/1000)
		// The lock itself expired 3 s after the last extension; a wait
		// far beyond that is the dead transaction's, waited out. Less
		// would mean the held frame was not an extension's commit, and
		// the scenario tested nothing.
		if wait := time.Duration(res.LockWaitMs) * time.Millisecond; wait < 20*time.Second {
			t.Errorf("the rerun waited %s for the lock: the lock document was not held by a dead transaction", wait)
		}
	}
	final := s.checkFinal(in, manifestOpts{repairedFrom: []string{w.fence()}})
	s.checkKept(after, final, w.fence(), "the rerun")
}
