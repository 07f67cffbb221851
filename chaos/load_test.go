//go:build chaos

package chaos

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// loadSnapshot is the size of each of the ten writers' snapshots: with ten
// at --concurrency 16 on one emulator, big enough that chunk commits take
// seconds (as in issue 25's report), small enough that the row ends within
// three minutes on two cores.
const loadSnapshot = 1000

// Scenario 9 (issue 25): ten writers at --concurrency 16 with --lock-ttl 5s
// on one emulator, all started together: a lone writer on each of six
// dates, and two racing writers, with different inputs, on each of two
// more. The load is the fault: no proxy, every writer straight at the
// emulator. Each writer's own chunk traffic must not starve the renewals
// of its lock: every lone writer exits 0, and each racer 0 or 4 (it
// waited --lock-wait for the other). Then every date's get equals the
// input of the writer that wrote it last (the racer that exited 0 last),
// its root and documents carry that writer's fence, the manifest is exact,
// and no lock is left.
//
// Not parallel: it runs alone, so that its load does not stretch the TTLs
// the other scenarios rely on, nor theirs its own.
func TestTenWriters(t *testing.T) {
	s := newScenario(t, "9. ten writers at --concurrency 16, --lock-ttl 5 s, one emulator")
	type date struct {
		id      string
		inputs  []*input
		writers []*proc
	}
	var dates []*date
	for i := range 8 {
		d := &date{id: fmt.Sprintf("2026-10-%02d", i+1)}
		racers := 1
		if i >= 6 {
			racers = 2
		}
		for seed := 1; seed <= racers; seed++ {
			d.inputs = append(d.inputs, generated(t, d.id, loadSnapshot, seed))
		}
		dates = append(dates, d)
	}
	start := time.Now()
	for _, d := range dates {
		for i, in := range d.inputs {
			name := "lone writer " + d.id
			if len(d.inputs) > 1 {
				name = fmt.Sprintf("racer %d %s", i+1, d.id)
			}
			d.writers = append(d.writers, s.start(procSpec{name: name, host: s.direct(), limit: writeLimit,
				args: []string{"write", "--input", in.path, "--concurrency", "16", "--lock-ttl", "5s", "--json"}}))
		}
	}
	// Every writer has ended before any date is checked: checkFinal also
	// checks that no lock is left, in the whole project.
	var last time.Time
	winners := map[*date]int{} // the input of the writer that wrote last
	for _, d := range dates {
		var winner *proc
		for i, w := range d.writers {
			codes := []int{0}
			if len(d.writers) > 1 {
				codes = []int{0, 4}
			}
			if !s.exited(w, codes...) {
				continue
			}
			last = maxTime(last, w.endedAt())
			if w.wait() != 0 {
				continue
			}
			s.result(w)
			// Racers hold the lock in turn: the last to finish wrote last.
			if winner == nil || w.endedAt().After(winner.endedAt()) {
				winner, winners[d] = w, i
			}
		}
		if winner == nil {
			t.Errorf("%s: no writer exited 0", d.id)
		}
	}
	lost := 0
	for _, d := range dates {
		i, ok := winners[d]
		if !ok {
			lost = -1 // not checked
			continue
		}
		s.date = d.id
		st := s.checkFinal(d.inputs[i], manifestOpts{})
		s.checkAllFence(st, d.writers[i].fence(), d.writers[i].spec.name)
		s.mu.Lock()
		if s.lost >= 0 && lost >= 0 {
			lost += s.lost
		} else {
			lost = -1
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.lost = lost
	s.mu.Unlock()
	if !t.Failed() {
		s.recovered(last.Sub(start))
	}
	var all []*proc
	for _, d := range dates {
		all = append(all, d.writers...)
	}
	s.noteLoad(all)
}

// noteLoad notes what the load did to the writers: chunk commit latency,
// the lock's renewals (their slowest) and the writers that shed chunks or
// paused (lockRenewals in their results; none from a binary without it).
func (s *scenario) noteLoad(procs []*proc) {
	s.t.Helper()
	var commits []float64
	var slowest int64
	shed, paused := 0, 0
	for _, p := range procs {
		p.mu.Lock()
		for _, e := range p.entries {
			if chunkCommitted(e) {
				if ms, ok := e.Fields["durationMs"].(float64); ok {
					commits = append(commits, ms/1000)
				}
			}
		}
		p.mu.Unlock()
		var r struct {
			LockRenewals struct {
				SlowestMs int64 `json:"slowestMs"`
				Sheds     int   `json:"sheds"`
				Pauses    int   `json:"pauses"`
			} `json:"lockRenewals"`
		}
		if json.Unmarshal([]byte(strings.TrimSpace(p.stdoutString())), &r) == nil {
			slowest = max(slowest, r.LockRenewals.SlowestMs)
			if r.LockRenewals.Sheds > 0 {
				shed++
			}
			if r.LockRenewals.Pauses > 0 {
				paused++
			}
		}
		if lost := p.errorLines(); strings.Contains(lost, "lost the lock") {
			s.t.Logf("%s lost its lock: %s", p.spec.name, lost)
		}
	}
	if len(commits) == 0 {
		return
	}
	slices.Sort(commits)
	q := func(f float64) float64 { return commits[min(len(commits)-1, int(f*float64(len(commits))))] }
	s.note("chunk commits median %.1f s, p90 %.1f s; slowest lock renewal %d ms; %d of %d writers shed chunks, %d paused for an overdue renewal",
		q(0.5), q(0.9), slowest, shed, len(procs), paused)
}
