package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/pglock"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// pgCLI is a cli on a fresh emulator project whose PostgreSQL lock
// database (a fresh one) is at dsn.
func pgCLI(t *testing.T) (c *cli, dsn string, pool *pgxpool.Pool) {
	t.Helper()
	c = newCLI(t)
	dsn = pg.TestDatabase(t)
	pool, err := pglock.NewPool(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return c, dsn, pool
}

// rootMetadata reads the snapshot root's writer fields.
func rootMetadata(t *testing.T, c *cli, date string) (backend, fence string) {
	t.Helper()
	s, err := c.client().Collection("snapshots").Doc(date).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	md, _ := s.Data()["metadata"].(map[string]any)
	backend, _ = md["writerLockBackend"].(string)
	fence, _ = md["writerFence"].(string)
	return backend, fence
}

// fenceCounter reads the PostgreSQL fence counter of key (-1 if none).
func fenceCounter(t *testing.T, pool *pgxpool.Pool, key string) int64 {
	t.Helper()
	var n int64
	err := pool.QueryRow(context.Background(), `SELECT fence FROM syncguard_fence_counters WHERE fence_key = $1`, "fence:"+key).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A write under --lock-backend postgres takes its lock in PostgreSQL,
// stamps the fence and "postgres" on the root, leaves no lock behind and
// nothing in Firestore's lock collections. Switching the collection back to
// the Firestore backend is refused (exit 1, both backends named, nothing
// changed) until --allow-lock-backend-switch.
func TestWriteWithPostgresLock(t *testing.T) {
	t.Parallel()
	c, dsn, pool := pgCLI(t)
	in := genJSON(t, day, 120)
	code, out, errs := c.run(in, "write", "--input", "-", "--json", "--lock-backend", "postgres", "--lock-dsn", dsn)
	if code != exitOK {
		t.Fatalf("write: exit %d\n%s\n%s", code, out, errs)
	}
	var res snapshot.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Outcome != snapshot.OutcomeComplete || res.Fence != "000000000000001" {
		t.Fatalf("result: %v %+v", err, res)
	}
	if b, f := rootMetadata(t, c, day); b != "postgres" || f != res.Fence {
		t.Errorf("root records backend %q fence %q; want postgres, %s", b, f, res.Fence)
	}
	if n := fenceCounter(t, pool, c.snapKey("postgres", day)); n != 1 {
		t.Errorf("PostgreSQL fence counter %d; want 1", n)
	}
	var rows int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM syncguard_locks`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("%d lock rows after the write (%v); want the lock released", rows, err)
	}
	if docs := docsIn(t, c, "locks"); len(docs) != 0 {
		t.Errorf("Firestore lock documents %v; want none", docs)
	}
	if docs := docsIn(t, c, "fence_counters"); len(docs) != 0 {
		t.Errorf("Firestore fence counters %v; want none", docs)
	}
	_, got, _ := c.run("", "get", "--date", day)
	a, _ := model.Decode(strings.NewReader(in))
	b, err := model.Decode(strings.NewReader(got))
	if err != nil || !model.Equal(a, b) {
		t.Errorf("read back differs: %v %s", err, model.Diff(a, b))
	}

	// Env, as Cloud Run sets it: a second write gets the next fence.
	c.env["SNAPWRITER_LOCK_BACKEND"], c.env["SNAPWRITER_LOCK_DSN"] = "postgres", dsn
	if code, _, errs := c.run(in, "write", "--input", "-"); code != exitOK {
		t.Fatalf("write by env: exit %d\n%s", code, errs)
	}
	if _, f := rootMetadata(t, c, day); f != "000000000000002" {
		t.Errorf("second write's fence %s; want 2", f)
	}
	delete(c.env, "SNAPWRITER_LOCK_BACKEND")
	delete(c.env, "SNAPWRITER_LOCK_DSN")

	// Back to Firestore: refused before any snapshot document is written
	// (the Firestore lock is taken, and its counter moves, before the
	// root is read).
	before := snapshotDocs(t, c.project)
	code, _, errs = c.run(genJSON(t, day, 5), "write", "--input", "-")
	if code != exitError || !strings.Contains(errs, `"postgres"`) || !strings.Contains(errs, `"firestore"`) ||
		!strings.Contains(errs, "--allow-lock-backend-switch") {
		t.Fatalf("switch without the flag: exit %d; want 1 naming both backends\n%s", code, errs)
	}
	if after := snapshotDocs(t, c.project); after != before {
		t.Error("the refused switch changed the snapshot")
	}
	code, _, errs = c.run(genJSON(t, day, 5), "write", "--input", "-", "--allow-lock-backend-switch")
	if code != exitOK {
		t.Fatalf("switch with the flag: exit %d\n%s", code, errs)
	}
	if b, f := rootMetadata(t, c, day); b != "firestore" || f != "000000000000002" {
		t.Errorf("after the switch the root records %q %q; want firestore, 2 (the refused attempt took 1)", b, f)
	}
}

// pgHeld is a lock of snapshot day held in PostgreSQL by a peer, for a
// CLI (c) whose lock commands reach it with flags.
type pgHeld struct {
	c     *cli
	dsn   string
	b     *pglock.Backend
	key   string
	r     locking.AcquireResult
	flags []string
}

// holdPostgresLock has a peer take the PostgreSQL lock of snapshot day,
// as a Go or TypeScript writer on the same tables would.
func holdPostgresLock(t *testing.T) pgHeld {
	t.Helper()
	c, dsn, pool := pgCLI(t)
	b, err := pglock.New(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	key := c.snapKey("postgres", day)
	r, err := b.Acquire(context.Background(), key, time.Minute)
	if err != nil || !r.OK {
		t.Fatal(r, err)
	}
	return pgHeld{c: c, dsn: dsn, b: b, key: key, r: r, flags: []string{"--lock-backend", "postgres", "--lock-dsn", dsn}}
}

// A lock held in PostgreSQL (by a Go or TypeScript peer on the same
// tables) keeps a postgres-locked writer out: exit 4, nothing written. The
// lock commands see and release it.
func TestPostgresLockHeldAndLockCommands(t *testing.T) {
	t.Parallel()
	h := holdPostgresLock(t)
	c, dsn, key, r, pgFlags := h.c, h.dsn, h.key, h.r, h.flags
	code, _, errs := c.run(genJSON(t, day, 3), append([]string{"write", "--input", "-", "--lock-wait", "200ms"}, pgFlags...)...)
	if code != exitLockHeld {
		t.Fatalf("write against a held PostgreSQL lock: exit %d, want 4\n%s", code, errs)
	}
	if n := c.docCount(); n != 0 {
		t.Errorf("%d documents written while the lock was held", n)
	}

	code, out, errs := c.run("", append([]string{"lock", "status", "--key", key, "--json"}, pgFlags...)...)
	var st lockStatusJSON
	if code != exitOK || json.Unmarshal([]byte(out), &st) != nil || !st.Locked || st.Fence != r.Fence ||
		st.LockIDHash != locking.HashKey(r.LockID) {
		t.Errorf("lock status: exit %d\n%s\n%s", code, out, errs)
	}
	// Firestore, the default, knows nothing of it.
	if code, out, _ := c.run("", "lock", "status", "--key", key, "--json"); code != exitOK || !strings.Contains(out, `"locked": false`) {
		t.Errorf("Firestore lock status: exit %d\n%s", code, out)
	}
	code, out, errs = c.run(r.LockID+"\n", append([]string{"lock", "release", "--lock-id", "-"}, pgFlags...)...)
	if code != exitOK || !strings.Contains(out, "released") {
		t.Fatalf("lock release: exit %d\n%s\n%s", code, out, errs)
	}
	noSecrets(t, "lock command output", out+errs, r.LockID, dsn)
	if code, _, errs := c.run(genJSON(t, day, 3), append([]string{"write", "--input", "-"}, pgFlags...)...); code != exitOK {
		t.Fatalf("write after the release: exit %d\n%s", code, errs)
	}
	if _, f := rootMetadata(t, c, day); f != "000000000000002" {
		t.Errorf("fence %s after the peer's 1; want 2", f)
	}
}

// Bad lock flags are usage errors (exit 2) found before anything is read
// or written; an unreachable database is a runtime failure (exit 1) found
// before anything is written. No message carries the DSN's password.
func TestLockBackendFlagErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	const pw = "s3cr3t-Pw"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	in := genJSON(t, day, 3)
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unknown backend", []string{"--lock-backend", "mysql"}, exitUsage, `"mysql": want firestore or postgres`},
		{"postgres without DSN", []string{"--lock-backend", "postgres"}, exitUsage, "needs --lock-dsn"},
		{"DSN without postgres", []string{"--lock-dsn", "postgres://u:" + pw + "@h/db"}, exitUsage, "only for --lock-backend postgres"},
		{"malformed URL DSN", []string{"--lock-backend", "postgres", "--lock-dsn", "postgres://u:" + pw + "@h:port/db"}, exitUsage, "not a PostgreSQL connection string"},
		{"malformed escape", []string{"--lock-backend", "postgres", "--lock-dsn", "postgres://u:" + pw + "%zz@h/db"}, exitUsage, "not a PostgreSQL connection string"},
		{"malformed keywords", []string{"--lock-backend", "postgres", "--lock-dsn", "host=h password=" + pw + " port=x"}, exitUsage, "not a PostgreSQL connection string"},
		{"unreachable", []string{"--lock-backend", "postgres", "--lock-dsn", "postgres://u:" + pw + "@127.0.0.1:" + closedPort + "/db?connect_timeout=5"}, exitError, "connecting to the PostgreSQL lock database"},
	} {
		for _, cmd := range [][]string{{"write", "--input", "-"}, {"lock", "status", "--key", "k"}} {
			code, out, errs := c.run(in, append(cmd, tc.args...)...)
			if code != tc.code || !strings.Contains(errs, tc.msg) {
				t.Errorf("%s, %s: exit %d, want %d with %q\n%s%s", tc.name, cmd[0], code, tc.code, tc.msg, out, errs)
			}
			if strings.Contains(out+errs, pw) {
				t.Errorf("%s, %s: output carries the password:\n%s%s", tc.name, cmd[0], out, errs)
			}
		}
	}
	if n := c.docCount(); n != 0 {
		t.Errorf("%d documents written by refused commands", n)
	}
}

// Two snapwriter processes writing the same snapshot under the PostgreSQL
// lock at once: they take turns (the second waits for the first's lock),
// and the root ends with the later fence.
func TestPostgresLockTwoProcesses(t *testing.T) {
	t.Parallel()
	project := newProject(t)
	dsn := pg.TestDatabase(t)
	bin := binary(t)
	in, err := json.Marshal(model.Generate(day, 200, 3))
	if err != nil {
		t.Fatal(err)
	}
	env := binaryEnv(project, "SNAPWRITER_LOCK_BACKEND=postgres", "SNAPWRITER_LOCK_DSN="+dsn)
	var wg sync.WaitGroup
	outs := make([]string, 2)
	codes := make([]int, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(bin, "write", "--input", "-", "--json", "--lock-wait", "60s", "--log-level", "warn")
			cmd.Env, cmd.Stdin = env, bytes.NewReader(in)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			_ = cmd.Run()
			codes[i], outs[i] = cmd.ProcessState.ExitCode(), out.String()+errb.String()
		}()
	}
	wg.Wait()
	fences := map[string]bool{}
	for i := range 2 {
		if codes[i] != exitOK {
			t.Fatalf("process %d: exit %d\n%s", i, codes[i], outs[i])
		}
		var res snapshot.Result
		if err := json.Unmarshal([]byte(outs[i][:strings.LastIndex(outs[i], "}")+1]), &res); err != nil {
			t.Fatalf("process %d output: %v\n%s", i, err, outs[i])
		}
		fences[res.Fence] = true
	}
	if !fences["000000000000001"] || !fences["000000000000002"] {
		t.Errorf("fences %v; want 1 and 2", fences)
	}
	c := &cli{t: t, project: project}
	if b, f := rootMetadata(t, c, day); b != "postgres" || f != "000000000000002" {
		t.Errorf("root records %q %q; want postgres, 2", b, f)
	}
}
