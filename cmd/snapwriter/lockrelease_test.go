package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/locking"
)

// lock release --date on the Firestore lock: it shows the lock, asks at a
// terminal (anything but y releases nothing, exit 1), needs --yes without
// one (exit 2, nothing read), releases with y or --yes, and says so when
// the date has no live lock (exit 1). Neither the key's lockId nor (in the
// logs) the key is ever shown.
func TestLockReleaseDate(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	key := c.snapKey("firestore", day)
	r := c.acquire(key, time.Minute)
	idHash := locking.HashKey(r.LockID)
	locked := func() bool { return len(docsIn(t, c, "locks")) == 1 }

	// No terminal, no --yes: a usage error before anything is read.
	rpcs := c.countRPCs()
	code, out, errs := c.run("y\n", "lock", "release", "--date", day)
	if code != exitUsage || !strings.Contains(errs, "--yes") || rpcs.Load() != 0 || !locked() {
		t.Fatalf("without a terminal: exit %d, %d RPCs\n%s\n%s", code, rpcs.Load(), out, errs)
	}
	c.interceptors = nil

	// At a terminal: declined (an empty answer, "n", the end of stdin).
	c.stdinTerminal = true
	for _, answer := range []string{"\n", "n\n", "", "yess\n"} {
		code, out, errs = c.run(answer, "lock", "release", "--date", day)
		if code != exitError || !strings.Contains(errs, "not confirmed") || !locked() {
			t.Fatalf("answer %q: exit %d, want 1 and the lock kept\n%s\n%s", answer, code, out, errs)
		}
		if !strings.Contains(out, idHash) || !strings.Contains(out, r.Fence) || !strings.Contains(out, "expires at") || !strings.Contains(errs, "[y/N]") {
			t.Errorf("answer %q: the lock was not shown, or no question asked:\n%s\n%s", answer, out, errs)
		}
	}
	// Confirmed.
	code, out, errs = c.run("Y\n", "lock", "release", "--date", day, "--log-format", "json")
	if code != exitOK || !strings.Contains(out, "released lock "+idHash) || locked() {
		t.Fatalf("confirmed: exit %d\n%s\n%s", code, out, errs)
	}
	noSecrets(t, "release --date output and logs", out+errs, r.LockID)
	noSecrets(t, "release --date logs", errs, key)

	// No live lock: exit 1, the date and key hash named.
	code, out, errs = c.run("y\n", "lock", "release", "--date", day)
	if code != exitError || !strings.Contains(errs, "nothing released: snapshot "+day+" has no live lock (key hash "+locking.HashKey(key)+")") {
		t.Errorf("no lock: exit %d\n%s\n%s", code, out, errs)
	}

	// --yes without a terminal, --json: the lock shown on stderr, the
	// result on stdout; the fence counter stays.
	c.stdinTerminal = false
	r2 := c.acquire(key, time.Minute)
	code, out, errs = c.run("", "lock", "release", "--date", day, "--yes", "--json")
	var rel lockReleaseJSON
	if code != exitOK || json.Unmarshal([]byte(out), &rel) != nil || !rel.Released || rel.LockIDHash != locking.HashKey(r2.LockID) || rel.Fence != "000000000000002" {
		t.Fatalf("--yes --json: exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "lockId hash") || strings.Contains(errs, "[y/N]") {
		t.Errorf("--yes: the lock not shown on stderr, or a question asked:\n%s", errs)
	}
	noSecrets(t, "release --date --json stderr", errs, key, r2.LockID)
	if r3 := c.acquire(key, time.Minute); r3.Fence != "000000000000003" {
		t.Errorf("fence after the release: %s", r3.Fence)
	}

	// Bad combinations and values: exit 2.
	for _, args := range [][]string{
		{"--date", "2026-02-30", "--yes"},
		{"--date", day, "--lock-id", r2.LockID},
		{"--lock-id", r2.LockID, "--yes"},
		{"--key", "", "--yes"},
		{},
	} {
		if code, _, errs := c.run("", append([]string{"lock", "release"}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2\n%s", args, code, errs)
		}
	}
}

// lock release --date on the PostgreSQL lock, and --key: the same
// confirmation, the lock of that backend.
func TestLockReleaseDatePostgres(t *testing.T) {
	t.Parallel()
	h := holdPostgresLock(t)
	c, dsn, b, key, r, pgFlags := h.c, h.dsn, h.b, h.key, h.r, h.flags
	c.stdinTerminal = true
	code, out, errs := c.run("no\n", append([]string{"lock", "release", "--date", day}, pgFlags...)...)
	if code != exitError || !strings.Contains(out, locking.HashKey(r.LockID)) {
		t.Fatalf("declined: exit %d\n%s\n%s", code, out, errs)
	}
	if info, err := locking.GetByKey(context.Background(), b, key); err != nil || info == nil {
		t.Fatalf("declined, yet the lock is gone: %v %v", info, err)
	}
	code, out, errs = c.run("yes\n", append([]string{"lock", "release", "--key", key, "--log-format", "json"}, pgFlags...)...)
	if code != exitOK || !strings.Contains(out, "released lock") {
		t.Fatalf("confirmed: exit %d\n%s\n%s", code, out, errs)
	}
	noSecrets(t, "release --key output and logs", out+errs, r.LockID, dsn)
	noSecrets(t, "release --key logs", errs, key)
	if info, err := locking.GetByKey(context.Background(), b, key); err != nil || info != nil {
		t.Errorf("after the release: %v %v", info, err)
	}
}
