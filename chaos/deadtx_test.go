//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// Scenario 10: reads during a dead transaction. A snapshot written by the
// binary; then this process opens a read-write transaction that reads the
// root, the fence document and every district document (by name and by a
// query of the districts collection), and never commits it — what a writer
// killed inside its finish transaction leaves, its locks held until
// Firestore expires it (snapshot.TransactionIdleExpiry after its last
// use). get, list and verify then exit 0 with the right answer (get ==
// input), each within a quarter of that expiry, so that all three end
// long before it: a command that waited on the dead transaction's locks
// would have taken until it expired. A transactional write of the root
// afterwards is refused, proving the locks were held throughout. The row
// records each command's time without and with the transaction open.
func TestReadsDuringDeadTransaction(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "10. reads during a dead transaction (root, fence and every district locked)")
	in := generated(t, day, midSnapshot, 1)
	if !s.exited(s.run("write", s.direct(), "write", "--input", in.path), 0) {
		t.FailNow()
	}
	bound := snapshot.TransactionIdleExpiry / 4
	commands := []struct {
		name  string
		args  []string
		check func(out string) error
	}{
		{"get", []string{"get", "--date", day, "--compact"}, func(out string) error {
			got, err := model.Decode(strings.NewReader(out))
			if err != nil {
				return fmt.Errorf("printed what model.Decode refuses: %w", err)
			}
			lost := lostDistricts(in.snap, got)
			s.mu.Lock()
			s.lost = lost
			s.mu.Unlock()
			if !model.Equal(got, in.snap) {
				return fmt.Errorf("differs from the input: %s", model.Diff(got, in.snap))
			}
			return nil
		}},
		{"list", []string{"list", "--json"}, func(out string) error {
			var list []snapshot.Summary
			if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 || list[0].State != snapshot.StateComplete {
				return fmt.Errorf("want %s complete, got %v: %q", day, err, out)
			}
			return nil
		}},
		{"verify", []string{"verify", "--date", day, "--input", in.path, "--json"}, func(out string) error {
			var rep snapshot.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.Intact || !rep.Complete || rep.Documents != midSnapshot {
				return fmt.Errorf("want an intact complete snapshot of %d districts, got %v: %.500s", midSnapshot, err, out)
			}
			return nil
		}},
	}
	// runAll runs the three commands and says how long each took.
	runAll := func(when string) string {
		var took []string
		for _, c := range commands {
			p := s.start(procSpec{name: c.name + " (" + when + ")", host: s.direct(), args: c.args, limit: 2 * bound})
			ok := s.exited(p, 0)
			d := p.duration()
			took = append(took, fmt.Sprintf("%s %.1f s", c.name, d.Seconds()))
			if !ok {
				continue
			}
			if err := c.check(p.stdoutString()); err != nil {
				t.Errorf("%s, %s: %v", c.name, when, err)
			}
			if d > bound {
				t.Errorf("%s, %s: took %s, more than %s (a quarter of the %s a dead transaction keeps its locks)",
					c.name, when, d.Round(time.Millisecond), bound, snapshot.TransactionIdleExpiry)
			}
		}
		return strings.Join(took, ", ")
	}
	without := runAll("no tx")

	root := "snapshots/" + day
	docs := []string{root, root + "/snapwriter/fence"}
	for _, d := range in.snap.Payload.Districts {
		docs = append(docs, root+"/districts/district_"+d.DistrictID)
	}
	opened := time.Now()
	if _, n, err := emu.AbandonTransaction(context.Background(), s.project, docs, []string{root + "/districts", root + "/manifest"}); err != nil || n != 2*midSnapshot+2 {
		t.Fatalf("leaving a transaction open: it read %d documents (%v), want %d", n, err, 2*midSnapshot+2)
	}
	with := runAll("dead tx")
	if age := time.Since(opened); age >= snapshot.TransactionIdleExpiry {
		t.Fatalf("the commands took %s: the dead transaction may have expired", age.Round(time.Millisecond))
	}
	ref := s.client.Collection("snapshots").Doc(day)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	err := s.client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
		if _, err := tx.Get(ref); err != nil {
			return err
		}
		return tx.Update(ref, []firestore.Update{{Path: "probe", Value: 1}})
	}, firestore.MaxAttempts(1))
	if err == nil {
		t.Fatal("a transaction wrote the root while the dead one was open: it held no lock, and the row proves nothing")
	}
	s.note("no tx: %s; dead tx open: %s (bound %s each); a write of the root after them: %s",
		without, with, bound, status.Code(err))
	s.checkNoLocks()
}
