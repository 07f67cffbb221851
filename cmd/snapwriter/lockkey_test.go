package main

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// snapKey is the lock key a write of date holds in c's project and default
// database, in collection (default "snapshots"), on the lock backend named
// backend: what the writer computes from its Firestore client.
func (c *cli) snapKey(backend, date string, collection ...string) string {
	c.t.Helper()
	coll := snapshot.DefaultCollection
	if len(collection) > 0 {
		coll = collection[0]
	}
	s, err := snapshot.ScopeOf(c.client(), coll)
	if err != nil {
		c.t.Fatal(err)
	}
	k, err := s.LockKey(backend, date)
	if err != nil {
		c.t.Fatal(err)
	}
	return k
}

// stallFirstChunk makes c's next write hold its lock: its first district
// commit waits until release is closed. held is closed when it is there.
func stallFirstChunk(t *testing.T, c *cli) (held, release chan struct{}) {
	held, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.interceptors = []grpc.UnaryClientInterceptor{commitHook(func(ctx context.Context, cr *firestorepb.CommitRequest) error {
		if !writesDistricts(cr) {
			return nil
		}
		once.Do(func() {
			close(held)
			select {
			case <-release:
			case <-time.After(60 * time.Second):
				t.Error("the stalled write was never released")
			}
		})
		return nil
	})}
	return held, release
}

// Writers of the same date hold the same lock only when they write the
// same snapshot document: writers of two collections (one named with ":"),
// or of two projects sharing one PostgreSQL lock database, write at once —
// the second, with --lock-wait 0, while the first holds its lock — and
// both exit 0; a second writer of the same collection still exits 4.
// While the first is stalled, list (with the backend) sees it writing.
func TestLockScopeConcurrentWrites(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		postgres bool
		// project and coll place the second writer: its own project or
		// the first's, and its --collection.
		project, coll string
		code          int
	}{
		{"firestore, two collections", false, "same", "daily:eu", exitOK},
		{"postgres, two collections", true, "same", "daily:eu", exitOK},
		{"postgres, two projects", true, "own", "snapshots", exitOK},
		{"firestore, same collection", false, "same", "snapshots", exitLockHeld},
		{"postgres, same collection", true, "same", "snapshots", exitLockHeld},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newCLI(t)
			var flags []string
			if tc.postgres {
				flags = []string{"--lock-backend", "postgres", "--lock-dsn", pg.TestDatabase(t)}
			}
			b, coll := newCLI(t), tc.coll
			if tc.project == "same" {
				b = &cli{t: t, project: a.project, env: maps.Clone(a.env)}
			}

			held, release := stallFirstChunk(t, a)
			type result struct {
				code     int
				out, err string
			}
			done := make(chan result, 1)
			go func() {
				code, out, errs := a.run(genJSON(t, day, 120), append([]string{"write", "--input", "-", "--concurrency", "1"}, flags...)...)
				done <- result{code, out, errs}
			}()
			select {
			case <-held:
			case r := <-done:
				t.Fatalf("first writer ended before its chunks: exit %d\n%s", r.code, r.err)
			}
			if got := listStates(t, a, flags...); got[day] != "writing" {
				t.Errorf("list while the first writer holds its lock: %v, want %s writing", got, day)
			}

			code, out, errs := b.run(genJSON(t, day, 7), append([]string{"write", "--input", "-", "--lock-wait", "0", "--collection", coll}, flags...)...)
			if code != tc.code {
				t.Errorf("second writer: exit %d, want %d\n%s\n%s", code, tc.code, out, errs)
			}
			close(release)
			if r := <-done; r.code != exitOK {
				t.Fatalf("first writer: exit %d\n%s\n%s", r.code, r.out, r.err)
			}
			if tc.code != exitOK {
				return
			}
			// Both snapshots are whole, each in its own place.
			for _, w := range []struct {
				c    *cli
				coll string
				n    int
			}{{a, "snapshots", 120}, {b, coll, 7}} {
				code, out, errs := w.c.run("", "get", "--date", day, "--compact", "--collection", w.coll)
				s, err := model.Decode(strings.NewReader(out))
				if code != exitOK || err != nil || len(s.Payload.Districts) != w.n {
					t.Errorf("snapshot in %s: exit %d, %v\n%s", w.coll, code, err, errs)
				}
			}
			want := map[string]string{day: "complete"}
			if got := listStates(t, b, append([]string{"--collection", coll}, flags...)...); !maps.Equal(got, want) {
				t.Errorf("list of the second collection: %v", got)
			}
		})
	}
}

// lock status --date shows the lock a write of that date holds, and its
// key: per collection, per backend, the project on PostgreSQL.
func TestLockStatusDate(t *testing.T) {
	t.Parallel()
	c, dsn, _ := pgCLI(t)
	pgFlags := []string{"--lock-backend", "postgres", "--lock-dsn", dsn}
	status := func(args ...string) lockStatusJSON {
		t.Helper()
		code, out, errs := c.run("", append([]string{"lock", "status", "--date", day, "--json"}, args...)...)
		var st lockStatusJSON
		if code != exitOK || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("lock status --date %v: exit %d\n%s\n%s", args, code, out, errs)
		}
		return st
	}
	fsKey := "snapshot:(default):snapshots:" + day
	if st := status(); st.Locked || st.Key != fsKey || st.KeyHash != locking.HashKey(fsKey) {
		t.Errorf("free: %+v, want key %s", st, fsKey)
	}
	// One Firestore client serves the key's scope and the lock backend.
	dials := 0
	code, out, _ := c.runDialing("", func() { dials++ }, "lock", "status", "--date", day)
	if code != exitOK || !strings.Contains(out, "not locked") || !strings.Contains(out, "key: "+fsKey) || dials != 1 {
		t.Errorf("text output: exit %d, %d Firestore clients, want 1\n%s", code, dials, out)
	}
	if st := status("--collection", "daily:eu"); st.Key != "snapshot:(default):daily%3Aeu:"+day {
		t.Errorf("collection with ':': key %s", st.Key)
	}
	pgKey := "snapshot:" + c.project + ":(default):snapshots:" + day
	if st := status(pgFlags...); st.Locked || st.Key != pgKey {
		t.Errorf("postgres: %+v, want key %s", st, pgKey)
	}

	// A writer at work: its lock, under the key --date names.
	for _, flags := range [][]string{nil, append([]string{"--collection", "daily:eu"}, pgFlags...)} {
		held, release := stallFirstChunk(t, c)
		done := make(chan int, 1)
		go func() {
			code, _, _ := c.run(genJSON(t, day, 60), append([]string{"write", "--input", "-", "--concurrency", "1"}, flags...)...)
			done <- code
		}()
		<-held
		st := status(flags...)
		if !st.Locked || st.Fence == "" || st.RemainingMs == nil {
			t.Errorf("%v: a write in progress: %+v, want locked", flags, st)
		}
		code, out, _ := c.run("", append([]string{"lock", "status", "--date", day}, flags...)...)
		if code != exitOK || !strings.HasPrefix(out, "locked\n") || !strings.Contains(out, "key:") || !strings.Contains(out, "fence:") {
			t.Errorf("text output of a held lock: exit %d\n%s", code, out)
		}
		close(release)
		if code := <-done; code != exitOK {
			t.Fatalf("write: exit %d", code)
		}
		c.interceptors = nil
	}

	for _, args := range [][]string{
		{"lock", "status"},
		{"lock", "status", "--date", day, "--key", "k"},
		{"lock", "status", "--date", "2026-02-30"},
		{"lock", "status", "--date", day, "--collection", "a/b"},
	} {
		if code, out, errs := c.run("", args...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2\n%s%s", args, code, out, errs)
		}
	}
}

// The upgrade from snapwriter versions whose key was "snapshot:<date>": a
// root they wrote carries a fence of that key's counter (7 here), above
// the new key's. The new writer is refused while a writer of the old
// version holds the old key (exit 4), and otherwise replaces the root
// once, recording its own key; from then on fences compare as before.
func TestUpgradeFromLegacyKey(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	ctx := context.Background()
	if code, _, errs := c.run(genJSON(t, day, 5), "write", "--input", "-"); code != exitOK {
		t.Fatalf("write: exit %d\n%s", code, errs)
	}
	locker, err := firestorelock.New(c.client())
	if err != nil {
		t.Fatal(err)
	}
	old := "snapshot:" + day
	var fence string
	for range 7 {
		r, err := locker.Acquire(ctx, old, time.Minute)
		if err != nil || !r.OK {
			t.Fatal(r, err)
		}
		if _, err := locker.Release(ctx, r.LockID); err != nil {
			t.Fatal(err)
		}
		fence = r.Fence
	}
	root := c.client().Collection("snapshots").Doc(day)
	if _, err := root.Update(ctx, []firestore.Update{{Path: "metadata.writerFence", Value: fence},
		{Path: "metadata.writerLockKeyHash", Value: firestore.Delete}}); err != nil {
		t.Fatal(err)
	}

	r := c.acquire(old, time.Minute) // a writer of the old version at work
	code, _, errs := c.run(genJSON(t, day, 6), "write", "--input", "-", "--lock-wait", "0")
	if code != exitLockHeld || !strings.Contains(errs, "earlier snapwriter version") {
		t.Fatalf("write beside an old-version writer: exit %d, want 4\n%s", code, errs)
	}
	noSecrets(t, "refusal", errs, old)
	if _, f := rootMetadata(t, c, day); f != fence {
		t.Errorf("refused write changed the root's fence to %s", f)
	}
	if _, err := locker.Release(ctx, r.LockID); err != nil {
		t.Fatal(err)
	}

	code, out, errs := c.run(genJSON(t, day, 6), "write", "--input", "-", "--json")
	var res snapshot.Result
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || res.Fence != "000000000000003" {
		t.Fatalf("write after the old writer stopped: exit %d\n%s\n%s", code, out, errs)
	}
	s, err := root.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md := s.Data()["metadata"].(map[string]any)
	if md["writerFence"] != res.Fence || md["writerLockKeyHash"] != locking.HashKey(c.snapKey("firestore", day)) {
		t.Errorf("root records fence %v key hash %v", md["writerFence"], md["writerLockKeyHash"])
	}
	if got := listStates(t, c); got[day] != "complete" {
		t.Errorf("list: %v", got)
	}
	if code, _, errs := c.run(genJSON(t, day, 6), "write", "--input", "-"); code != exitOK {
		t.Errorf("next write: exit %d\n%s", code, errs)
	}

	// list checks a legacy root left "writing" on the old key...
	abandonLegacy(t, c, day)
	if _, err := root.Update(ctx, []firestore.Update{{Path: "metadata.writerLockKeyHash", Value: firestore.Delete}}); err != nil {
		t.Fatal(err)
	}
	if got := listStates(t, c); got[day] != "interrupted" {
		t.Errorf("legacy root, no lock: %v", got)
	}
	r = c.acquire(old, time.Minute)
	if got := listStates(t, c); got[day] != "writing" {
		t.Errorf("legacy root, old key held: %v", got)
	}
	if _, err := locker.Release(ctx, r.LockID); err != nil {
		t.Fatal(err)
	}
	// ...and cannot check a key it does not know.
	const foreign = "0123456789abcdef01234567"
	if _, err := root.Update(ctx, []firestore.Update{{Path: "metadata.writerLockKeyHash", Value: foreign}}); err != nil {
		t.Fatal(err)
	}
	if out := listText(t, c); !strings.Contains(row(out, day), "unknown") ||
		!strings.Contains(out, "written under a lock key this snapwriter does not take (key hash "+foreign) {
		t.Errorf("list of a root under another key:\n%s", out)
	}
}
