//go:build chaos

package chaos

import (
	"context"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snapwriter/snapwriter/pgserver"
)

// lostLock is how a writer says it lost its lock.
var lostLock = regexp.MustCompile(`lost the lock`)

// Scenario 7: the PostgreSQL lock backend's server crashes (pg_ctl stop -m
// immediate) mid-write. The writer loses its lease and says so ("lost the
// lock"), exits 3, writes nothing after that, and leaves an exact manifest. PostgreSQL
// comes back on the same port and data directory; the same write again
// (over the partial root of the same input) exits 0, keeps every district
// the first stored without writing it again, and leaves get == input, an
// exact manifest and no lock left.
//
// The cluster is this scenario's own (durable, as production is), since it
// is killed. The write runs at --concurrency 1 with 40 ms each way between
// the binary and the emulator so that it outlasts its 5 s TTL after the
// crash: otherwise 2,000 districts may be done before the lease runs out.
func TestPostgresCrash(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "7. PostgreSQL lock server killed mid-write, restarted, rerun")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	srv, err := pgserver.Start(ctx, pgserver.WithoutReuse(), pgserver.Durable())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	in := leanGenerated(t, day, bigSnapshot, 1)
	s.proxy.SetLatency(40 * time.Millisecond)
	args := []string{"write", "--input", in.path, "--lock-backend", "postgres", "--lock-dsn", srv.DSN,
		"--lock-ttl", shortTTL.String(), "--concurrency", "1"}

	var fault moment
	killed := make(chan error, 1)
	match := afterChunks(5)
	w := s.start(procSpec{name: "write", host: s.viaProxy(), limit: writeLimit, args: args,
		onLine: func(_ *proc, e logEntry) {
			if match(e) && fault.set() {
				go func() { killed <- srv.Kill(ctx) }()
			}
		}})
	// No newer writer took over: exit 3, the manifest records what was
	// written (README, exit codes).
	s.exited(w, 3)
	faultAt := fault.get()
	if faultAt.IsZero() {
		t.Fatalf("the write ended before PostgreSQL was killed\n%s", w.describe())
	}
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	lostAt := w.endedAt()
	if e, ok := w.find(func(e logEntry) bool { return lostLock.MatchString(e.Raw) }); ok {
		lostAt = e.Time
	}
	if !lostLock.MatchString(w.stderrString()) {
		t.Errorf("the writer's stderr does not say it lost its lock\n%s", w.describe())
	}
	t.Logf("PostgreSQL killed; the writer lost its lock %.1f s later, ended %.1f s later",
		lostAt.Sub(faultAt).Seconds(), w.endedAt().Sub(faultAt).Seconds())

	st := s.read()
	t.Logf("after the write: %s", st)
	if st.rootFence != w.fence() {
		t.Errorf("the root carries writerFence %q, the writer's is %q", st.rootFence, w.fence())
	}
	s.checkManifest(st, manifestOpts{})
	// Nothing written after the lease was lost: another writer could take
	// the lock only a second (the liveness tolerance) after it expired,
	// which is no earlier than the writer noticed.
	written, late := 0, 0
	var lateAt time.Time
	for _, d := range st.docs {
		if d.fence != w.fence() {
			continue
		}
		written++
		if d.updated.After(lostAt.Add(time.Second)) {
			late++
			lateAt = maxTime(lateAt, d.updated)
		}
	}
	if late > 0 {
		t.Errorf("%d district documents written after the writer lost its lock (%s), the last at %s",
			late, lostAt.Format(time.RFC3339Nano), lateAt.Format(time.RFC3339Nano))
	}
	s.note("%d of %d districts written before the lease was lost", written, bigSnapshot)

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	r := s.start(procSpec{name: "rerun", host: s.viaProxy(), limit: writeLimit, args: append(slices.Clone(args), "--json")})
	if s.exited(r, 0) {
		s.recovered(r.endedAt().Sub(faultAt))
	}
	if res := s.result(r); res != nil {
		s.note("rerun: kept %d, wrote %d, %d root commits", res.DistrictsKept, res.DistrictsWritten, res.RootCommits)
		if res.DistrictsKept < len(st.docs) {
			t.Errorf("the rerun kept %d districts, but %d were stored (all of this input, intact)", res.DistrictsKept, len(st.docs))
		}
	}
	final := s.checkFinal(in, manifestOpts{repairedFrom: []string{w.fence()}})
	s.checkKept(st, final, w.fence(), "the rerun")
	if n := pgLocks(t, srv.DSN); n != 0 {
		t.Errorf("%d lock row(s) left in PostgreSQL", n)
	}
}

// pgLocks counts the rows of SyncGuard's lock table.
func pgLocks(t *testing.T, dsn string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM syncguard_locks`).Scan(&n); err != nil {
		t.Fatalf("PostgreSQL: %v", err)
	}
	return n
}
