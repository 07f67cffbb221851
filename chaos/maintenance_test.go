//go:build chaos

package chaos

import (
	"syscall"
	"testing"
	"time"
)

// Cloud Run's maintenance migration: SIGTSTP 10 s before the task is
// frozen, SIGCONT after. The writer runs without a terminal (stdin
// /dev/null, stderr a pipe), as a Cloud Run task does.

// maintenanceDistricts is the size of the maintenance rows' writes: 20
// chunks, a write of several seconds, so that the notice comes mid-write.
const maintenanceDistricts = 1000

// Log messages of a maintenance pause (snapshot.Maintenance).
const (
	noticeMsg  = "maintenance notice: renewing the lock now; no chunk starts until the pause ends"
	renewedMsg = "lock renewed for the maintenance notice"
	overMsg    = "maintenance pause over: lock confirmed; chunks start again"
)

func message(msg string) func(logEntry) bool {
	return func(e logEntry) bool { return e.Message == msg }
}

// waitLine waits until p logged a line that matches, or ended, or timeout
// passed; it reports the line.
func waitLine(p *proc, match func(logEntry) bool, timeout time.Duration) (logEntry, bool) {
	deadline := time.Now().Add(timeout)
	for {
		if e, ok := p.find(match); ok {
			return e, true
		}
		select {
		case <-p.done:
			return p.find(match)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return logEntry{}, false
		}
	}
}

// startNoticed starts a write of in whose fourth chunk's commit brings a
// SIGTSTP, and waits for the notice's renewal and for the chunks that were
// in flight at the notice to commit, as they do in Cloud Run's 10 s before
// the freeze. It returns the process and the notice's and the renewal's
// log lines.
func startNoticed(s *scenario, name string, in *input, extra ...string) (w *proc, notice, renewed logEntry) {
	s.t.Helper()
	match := afterChunks(4)
	args := append([]string{"write", "--input", in.path, "--json", "--lock-ttl", shortTTL.String()}, extra...)
	w = s.start(procSpec{name: name, host: s.viaProxy(), args: args,
		onLine: func(p *proc, e logEntry) {
			if match(e) {
				p.signal(syscall.SIGTSTP)
			}
		}})
	if _, ok := waitSignalled(w, syscall.SIGTSTP, hardLimit); !ok {
		s.exited(w)
		s.t.Fatalf("%s never got SIGTSTP\n%s", name, w.describe())
	}
	notice, ok := waitLine(w, message(noticeMsg), 30*time.Second)
	if !ok {
		s.t.Fatalf("%s logged no maintenance notice after SIGTSTP\n%s", name, w.describe())
	}
	if renewed, ok = waitLine(w, message(renewedMsg), shortTTL); !ok {
		s.t.Fatalf("%s did not renew its lock within the TTL of the notice\n%s", name, w.describe())
	}
	inFlight, _ := notice.Fields["chunksInFlight"].(float64)
	// The chunks in flight at the notice commit; none starts.
	if _, ok := waitLine(w, func() func(logEntry) bool {
		n := 0
		return func(e logEntry) bool {
			if chunkCommitted(e) && !e.Time.Before(notice.Time) {
				n++
			}
			return n >= int(inFlight)
		}
	}(), 30*time.Second); !ok {
		s.t.Fatalf("the %v chunks in flight at the notice did not commit\n%s", inFlight, w.describe())
	}
	return w, notice, renewed
}

// heldChunks checks that no chunk started between the notice and until:
// the chunks that committed then are at most those in flight at the
// notice, and each started (its log line's time less its duration) before
// the notice's renewal was logged. It returns how many committed.
func heldChunks(s *scenario, w *proc, notice, renewed logEntry, until time.Time) int {
	s.t.Helper()
	inFlight, _ := notice.Fields["chunksInFlight"].(float64)
	w.mu.Lock()
	entries := append([]logEntry(nil), w.entries...)
	w.mu.Unlock()
	n := 0
	for _, e := range entries {
		if !chunkCommitted(e) || e.Time.Before(notice.Time) || e.Time.After(until) {
			continue
		}
		n++
		ms, _ := e.Fields["durationMs"].(float64)
		if started := e.Time.Add(-time.Duration(ms) * time.Millisecond); started.After(renewed.Time) {
			s.t.Errorf("chunk %d started %s after the notice's renewal, before the pause ended", e.BatchIndex, started.Sub(renewed.Time))
		}
	}
	if n > int(inFlight) {
		s.t.Errorf("%d chunks committed during the pause; only %v were in flight at the notice", n, inFlight)
	}
	return n
}

// Maintenance row a: SIGTSTP mid-write, the writer renews its lock and
// holds its chunks; frozen (SIGSTOP) for half the TTL; SIGCONT. The lock,
// renewed at the notice, outlives the freeze: the write confirms it and
// completes.
func TestMaintenancePause(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "11a. SIGTSTP (maintenance notice) mid-write, frozen (SIGSTOP) TTL/2, SIGCONT")
	in := generated(t, day, maintenanceDistricts, 7)
	w, notice, renewed := startNoticed(s, "write", in)
	w.signal(syscall.SIGSTOP)
	frozen := time.Now()
	time.Sleep(shortTTL / 2) // the freeze itself: shorter than the TTL
	w.signal(syscall.SIGCONT)
	thawed := time.Now()
	if s.exited(w, 0) {
		s.recovered(w.endedAt().Sub(thawed))
	}
	over, ok := w.find(message(overMsg))
	switch {
	case !ok:
		t.Errorf("no line says the pause ended\n%s", w.describe())
	case over.str("resumedBy") != "resume" || over.Time.Before(thawed.Add(-time.Second)):
		// (log times are the process's clock, the same machine's)
		t.Errorf("the pause ended %s, at %s, SIGCONT at %s; want by SIGCONT", over.str("resumedBy"), over.Time, thawed)
	}
	held := heldChunks(s, w, notice, renewed, over.Time)
	if r := s.result(w); r != nil && (!r.Complete || r.DistrictsWritten != maintenanceDistricts) {
		t.Errorf("result: complete %v, %d written; want all %d", r.Complete, r.DistrictsWritten, maintenanceDistricts)
	}
	s.checkFinal(in, manifestOpts{})
	s.note("renewed %s after SIGTSTP; %d chunk(s) in flight at the notice committed, none started; held %.1f s (frozen %.1f s); lock confirmed %s after SIGCONT",
		renewed.Time.Sub(notice.Time).Round(time.Millisecond), held, over.Time.Sub(notice.Time).Seconds(),
		thawed.Sub(frozen).Seconds(), over.Time.Sub(thawed).Round(time.Millisecond))
}

// Maintenance row b: SIGTSTP with no freeze and no SIGCONT: the writer
// holds its chunks for the notice's bound (snapshot.DefaultMaintenanceWait,
// 20 s), then confirms its lock and completes.
func TestMaintenanceNoticeWithoutSIGCONT(t *testing.T) {
	t.Parallel()
	const wait = 20 * time.Second // snapshot.DefaultMaintenanceWait
	s := newScenario(t, "11b. SIGTSTP (maintenance notice) mid-write, no freeze, no SIGCONT")
	in := generated(t, day, maintenanceDistricts, 8)
	w, notice, renewed := startNoticed(s, "write", in)
	if s.exited(w, 0) {
		s.recovered(w.endedAt().Sub(notice.Time))
	}
	over, ok := w.find(message(overMsg))
	switch {
	case !ok:
		t.Fatalf("no line says the pause ended\n%s", w.describe())
	case over.str("resumedBy") != "wait over":
		t.Errorf("the pause ended by %q; want the wait", over.str("resumedBy"))
	}
	if held := over.Time.Sub(notice.Time); held < wait || held > wait+5*time.Second {
		t.Errorf("held %s; want the wait, %s (and the renewal)", held, wait)
	}
	heldChunks(s, w, notice, renewed, over.Time)
	if r := s.result(w); r != nil && !r.Complete {
		t.Error("the write is not complete")
	}
	s.checkFinal(in, manifestOpts{})
	s.note("held %.1f s (the 20 s bound), then the lock confirmed and the write completed", over.Time.Sub(notice.Time).Seconds())
}

// Maintenance row c: SIGTSTP, then frozen past the TTL; a second writer
// with other content takes the snapshot over meanwhile; SIGCONT. The
// frozen writer's confirmation finds its lock lost: it starts no chunk and
// ends fenced out (5) or with its lock lost (3); the second writer's
// snapshot is intact.
func TestMaintenanceFreezePastTTL(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "11c. SIGTSTP mid-write, frozen past the TTL; a second writer; SIGCONT")
	first := generated(t, day, maintenanceDistricts, 9)
	second := generated(t, day, maintenanceDistricts, 10)
	w1, notice, renewed := startNoticed(s, "writer 1", first)
	w1.signal(syscall.SIGSTOP)
	frozen := time.Now()
	w1.extendLimit(hardLimit + 2*time.Minute)
	sleepUntil(renewed.Time.Add(shortTTL + liveness))
	w2 := s.start(procSpec{name: "writer 2", host: s.direct(), limit: writeLimit,
		args: []string{"write", "--input", second.path, "--json"}})
	if s.exited(w2, 0) {
		s.recovered(w2.endedAt().Sub(frozen))
	}
	w1.signal(syscall.SIGCONT)
	s.exited(w1, 5, 3)
	heldChunks(s, w1, notice, renewed, w1.endedAt())
	if _, ok := w1.find(message(overMsg)); ok {
		t.Errorf("writer 1 resumed its chunks after losing its lock\n%s", w1.describe())
	}
	// Whatever writer 1 had in flight has reached the emulator by now.
	time.Sleep(time.Second)
	st := s.checkFinal(second, manifestOpts{})
	s.checkAllFence(st, w2.fence(), "writer 2")
	s.note("frozen with no chunk in flight; writer 2's lock wait %s", lockWait(w2))
}

// lockWait is the lock wait a writer logged.
func lockWait(p *proc) time.Duration {
	e, _ := p.find(func(e logEntry) bool { return e.Message == "snapshot lock acquired" })
	ms, _ := e.Fields["lockWaitMs"].(float64)
	return time.Duration(ms) * time.Millisecond
}
