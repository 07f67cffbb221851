//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Scenario 7: a prune SIGKILLed mid-delete (after a third of its district
// chunks were committed): `list` shows the snapshot deleting, the
// application's newest-successful query does not return it, and a rerun
// of the prune, once the dead prune's lock expired, exits 0 and leaves no
// document of that date (root, districts, manifest pages, fence document)
// and no lock; the newer snapshot is intact.
func TestSIGKILLMidPrune(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "7. SIGKILL mid-prune, then prune again")
	const newer = "2026-11-21"
	in := leanGenerated(t, day, bigSnapshot, 1)
	keep := generated(t, newer, 10, 2)
	for _, w := range []*input{in, keep} {
		s.exited(s.run("write", s.direct(), "write", "--input", w.path), 0)
	}
	cutoff := []string{"--before", newer, "--lock-ttl", shortTTL.String()}
	k := chunks(bigSnapshot) / 3
	n := 0
	p := s.start(procSpec{name: "prune", host: s.viaProxy(), limit: writeLimit,
		args: append([]string{"prune"}, cutoff...),
		onLine: func(p *proc, e logEntry) {
			if e.Message == "delete chunk committed" {
				if n++; n == k {
					p.signal(syscall.SIGKILL)
				}
			}
		}})
	s.killed(p, "a third of its delete chunks were committed")
	killedAt := p.signalledAt(syscall.SIGKILL)
	s.proxy.ResetAll()

	after := s.read()
	if !after.rootExists || after.writeState != "deleting" {
		t.Fatalf("after the kill the root is not marked deleting: %s", after)
	}
	if len(after.docs) == 0 || len(after.docs) >= bigSnapshot {
		t.Errorf("after the kill %d district documents are left, want some deleted and some not (killed mid-prune)", len(after.docs))
	}
	s.note("after the kill: %d of %d districts left", len(after.docs), bigSnapshot)
	l := s.run("list", s.direct(), "list", "--json")
	var list []struct {
		SnapshotID string `json:"snapshotId"`
		State      string `json:"state"`
	}
	if err := json.Unmarshal([]byte(l.stdoutString()), &list); err != nil {
		t.Fatalf("list --json: %v\n%s", err, l.describe())
	}
	for _, e := range list {
		if e.SnapshotID == day && e.State != "deleting" {
			t.Errorf("list shows %s as %q, want deleting", day, e.State)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	succ, err := s.client.Collection("snapshots").Where("metadata.status", "==", "success").Documents(ctx).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range succ {
		if d.Ref.ID == day {
			t.Error("the application's newest-successful query still finds the snapshot being deleted")
		}
	}

	sleepUntil(killedAt.Add(shortTTL + liveness))
	r := s.start(procSpec{name: "rerun", host: s.viaProxy(), limit: writeLimit, args: append([]string{"prune"}, cutoff...)})
	if s.exited(r, 0) {
		s.recovered(r.endedAt().Sub(killedAt))
	}
	// A delete chunk the kill cut off after its fence read leaves that
	// transaction open on the server until Firestore expires it (60 s):
	// the rerun's mark, which writes the fence document, waits it out
	// (--contention-wait), as a rerun write does.
	s.logWarnings(r)
	root := s.client.Collection("snapshots").Doc(day)
	if _, err := root.Get(ctx); err == nil {
		t.Errorf("the root of %s is still there", day)
	}
	colls, err := root.Collections(ctx).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range colls {
		docs, err := c.DocumentRefs(ctx).GetAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(docs) > 0 {
			t.Errorf("%d documents left in %s/%s after the rerun", len(docs), day, c.ID)
		}
	}
	s.checkNoLocks()
	s.date = newer
	s.checkGet(keep)
	if out := r.stdoutString(); !strings.Contains(out, "pruned") {
		t.Errorf("the rerun's report does not say pruned:\n%s", out)
	}
}
