package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
)

// lockStatusJSON decodes the --json output of `lock status`.
type lockStatusJSON struct {
	Locked      bool    `json:"locked"`
	KeyHash     string  `json:"keyHash"`
	LockIDHash  string  `json:"lockIdHash,omitempty"`
	Fence       string  `json:"fence,omitempty"`
	AcquiredAt  *string `json:"acquiredAt,omitempty"`
	ExpiresAt   *string `json:"expiresAt,omitempty"`
	RemainingMs *int64  `json:"remainingMs,omitempty"`
	Key         string  `json:"key,omitempty"`
	LockID      string  `json:"lockId,omitempty"`
}

// lockReleaseJSON decodes the --json output of `lock release`.
type lockReleaseJSON struct {
	Released   bool   `json:"released"`
	LockIDHash string `json:"lockIdHash"`
	Reason     string `json:"reason,omitempty"`
	KeyHash    string `json:"keyHash,omitempty"`
	Fence      string `json:"fence,omitempty"`
}

// acquire takes key on c's project as a writer would.
func (c *cli) acquire(key string, ttl time.Duration) locking.AcquireResult {
	c.t.Helper()
	b, err := firestorelock.New(c.client())
	if err != nil {
		c.t.Fatal(err)
	}
	r, err := b.Acquire(context.Background(), key, ttl)
	if err != nil || !r.OK {
		c.t.Fatalf("acquire: %+v, %v", r, err)
	}
	return r
}

// countRPCs makes c count the RPCs its commands send.
func (c *cli) countRPCs() *atomic.Int32 {
	var n atomic.Int32
	c.interceptors = append(c.interceptors, func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		n.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	return &n
}

// noSecrets fails if a raw key or lockId appears in s (logs, messages).
func noSecrets(t *testing.T, what, s string, secrets ...string) {
	t.Helper()
	for _, x := range secrets {
		if x != "" && strings.Contains(s, x) {
			t.Errorf("%s carries the raw value %q:\n%s", what, x, s)
		}
	}
}

func TestLockStatus(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	key := "snapshot:" + day
	keyHash := locking.HashKey(key)

	code, out, errs := c.run("", "lock", "status", "--key", key, "--log-level", "debug")
	if code != exitOK || !strings.Contains(out, "not locked") || !strings.Contains(out, keyHash) {
		t.Errorf("status of a free key: exit %d\n%s\n%s", code, out, errs)
	}
	noSecrets(t, "output", out+errs, key)
	code, out, _ = c.run("", "lock", "status", "--key", key, "--json")
	var st lockStatusJSON
	if code != exitOK || json.Unmarshal([]byte(out), &st) != nil || st.Locked || st.KeyHash != keyHash || st.RemainingMs != nil {
		t.Errorf("status --json of a free key: exit %d\n%s", code, out)
	}

	r := c.acquire(key, time.Minute)
	lockIDHash := locking.HashKey(r.LockID)
	code, out, errs = c.run("", "lock", "status", "--key", key, "--log-level", "debug")
	if code != exitOK {
		t.Fatalf("status: exit %d\n%s", code, errs)
	}
	for _, want := range []string{"locked", keyHash, lockIDHash, r.Fence, "remaining", r.ExpiresAt.UTC().Format("2006-01-02T15:04:05.000")} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "not locked") {
		t.Errorf("held lock reported free:\n%s", out)
	}
	noSecrets(t, "status output and logs", out+errs, key, r.LockID)

	// The NFD spelling of a key names the same lock as its NFC spelling.
	nfc := "snapshot:caf\u00e9"
	r2 := c.acquire(nfc, time.Minute)
	code, out, _ = c.run("", "lock", "status", "--key", "snapshot:cafe\u0301", "--json")
	if code != exitOK || json.Unmarshal([]byte(out), &st) != nil || !st.Locked || st.KeyHash != locking.HashKey(nfc) ||
		st.LockIDHash != locking.HashKey(r2.LockID) || st.Fence != r2.Fence {
		t.Errorf("status --json of the NFD spelling: exit %d\n%s", code, out)
	}

	code, out, errs = c.run("", "lock", "status", "--key", key, "--json")
	st = lockStatusJSON{}
	if code != exitOK || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("status --json: exit %d\n%s\n%s", code, out, errs)
	}
	if !st.Locked || st.KeyHash != keyHash || st.LockIDHash != lockIDHash || st.Fence != "000000000000001" ||
		st.RemainingMs == nil || *st.RemainingMs <= 0 || *st.RemainingMs > 60_000 || st.AcquiredAt == nil || st.ExpiresAt == nil {
		t.Errorf("status --json = %s", out)
	}
	if exp, err := time.Parse(time.RFC3339Nano, *st.ExpiresAt); err != nil || !exp.Equal(r.ExpiresAt) {
		t.Errorf("expiresAt %q, want %s (%v)", *st.ExpiresAt, r.ExpiresAt, err)
	}
	if st.Key != "" || st.LockID != "" {
		t.Errorf("raw fields without --raw: %s", out)
	}
	noSecrets(t, "status --json", out, key, r.LockID)

	// --raw adds the raw key and lockId to the output, never to the logs.
	code, out, errs = c.run("", "lock", "status", "--key", key, "--raw", "--json", "--log-level", "debug")
	st = lockStatusJSON{}
	if code != exitOK || json.Unmarshal([]byte(out), &st) != nil || st.Key != key || st.LockID != r.LockID || st.LockIDHash != lockIDHash {
		t.Errorf("status --raw --json: exit %d\n%s\n%s", code, out, errs)
	}
	noSecrets(t, "logs of status --raw", errs, key, r.LockID)
	code, out, _ = c.run("", "lock", "status", "--key", key, "--raw")
	if code != exitOK || !strings.Contains(out, r.LockID) || !strings.Contains(out, key) {
		t.Errorf("status --raw: exit %d\n%s", code, out)
	}

	// SNAPWRITER_KEY stands in for --key.
	c.env["SNAPWRITER_KEY"] = key
	if code, out, errs := c.run("", "lock", "status"); code != exitOK || !strings.Contains(out, lockIDHash) {
		t.Errorf("SNAPWRITER_KEY: exit %d\n%s\n%s", code, out, errs)
	}
}

func TestLockStatusBadKeyExit2(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"a/b", "..", "__reserved__", strings.Repeat("k", 513), "\xff"} {
		c := newCLI(t)
		rpcs := c.countRPCs()
		code, out, errs := c.run("", "lock", "status", "--key", key)
		if code != exitUsage || !strings.Contains(errs, "key") {
			t.Errorf("status --key %q: exit %d, want 2\n%s\n%s", key, code, out, errs)
		}
		if n := rpcs.Load(); n != 0 {
			t.Errorf("status --key %q sent %d RPCs", key, n)
		}
	}
	c := newCLI(t)
	if code, _, errs := c.run("", "lock", "status"); code != exitUsage || !strings.Contains(errs, "key") {
		t.Errorf("status without --key: exit %d\n%s", code, errs)
	}
}

func TestLockRelease(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	key := "snapshot:" + day
	r := c.acquire(key, time.Minute)
	idHash := locking.HashKey(r.LockID)

	code, out, errs := c.run("", "lock", "release", "--lock-id", r.LockID, "--log-level", "debug")
	if code != exitOK || !strings.Contains(out, "released") || !strings.Contains(out, idHash) || !strings.Contains(out, r.Fence) {
		t.Fatalf("release: exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "lock force-released") {
		t.Errorf("release not logged:\n%s", errs)
	}
	noSecrets(t, "release output and logs", out+errs, key, r.LockID)
	if n := len(docsIn(t, c, "locks")); n != 0 {
		t.Errorf("%d lock documents after release", n)
	}
	if code, out, _ := c.run("", "lock", "status", "--key", key); code != exitOK || !strings.Contains(out, "not locked") {
		t.Errorf("status after release: exit %d\n%s", code, out)
	}

	// Again: not held, exit 1, nothing changed.
	code, out, errs = c.run("", "lock", "release", "--lock-id", r.LockID)
	if code != exitError || !strings.Contains(errs, "not held") || !strings.Contains(errs, "no lock carries") {
		t.Errorf("second release: exit %d, want 1\n%s\n%s", code, out, errs)
	}
	noSecrets(t, "second release", out+errs, key, r.LockID)
	code, out, _ = c.run("", "lock", "release", "--lock-id", r.LockID, "--json")
	var rel lockReleaseJSON
	if code != exitError || json.Unmarshal([]byte(out), &rel) != nil || rel.Released || rel.Reason != string(locking.ReasonNotFound) || rel.LockIDHash != idHash {
		t.Errorf("second release --json: exit %d\n%s", code, out)
	}

	// The fence counter stays: the next holder's fence is larger.
	if r2 := c.acquire(key, time.Minute); r2.Fence != "000000000000002" {
		t.Errorf("fence after a forced release = %s", r2.Fence)
	}

	// A lockId on stdin, and --json.
	other := c.acquire("other", time.Minute)
	code, out, errs = c.run(other.LockID+"\n", "lock", "release", "--lock-id", "-", "--json")
	if code != exitOK || json.Unmarshal([]byte(out), &rel) != nil || !rel.Released || rel.KeyHash != locking.HashKey("other") || rel.Fence != other.Fence {
		t.Errorf("release --lock-id - --json: exit %d\n%s\n%s", code, out, errs)
	}
}

// An expired lock is not released (exit 1), and the message says it expired.
func TestLockReleaseExpired(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	id := "EEEEEEEEEEEEEEEEEEEEEE"
	now := time.Now().UnixMilli()
	if _, err := c.client().Collection("locks").Doc("k").Set(context.Background(), map[string]any{
		"lockId": id, "expiresAtMs": now - 10_000, "acquiredAtMs": now - 40_000, "key": "k", "fence": "000000000000007",
	}); err != nil {
		t.Fatal(err)
	}
	code, out, errs := c.run("", "lock", "release", "--lock-id", id)
	if code != exitError || !strings.Contains(errs, "expired") {
		t.Errorf("release of an expired lock: exit %d, want 1\n%s\n%s", code, out, errs)
	}
	if n := len(docsIn(t, c, "locks")); n != 1 {
		t.Errorf("expired lock document touched: %d left", n)
	}
	if code, out, _ := c.run("", "lock", "status", "--key", "k"); code != exitOK || !strings.Contains(out, "not locked") {
		t.Errorf("status of an expired lock: exit %d\n%s", code, out)
	}
}

// A malformed lockId: exit 2, a message naming --lock-id (not the value),
// and no RPC at all.
func TestLockReleaseBadLockIDExit2(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.acquire("k", time.Minute)
	rpcs := c.countRPCs()
	for _, id := range []string{"short", r.LockID + "x", "!!!!!!!!!!!!!!!!!!!!!!", r.LockID[:21] + "/", " " + r.LockID[1:]} {
		code, out, errs := c.run("", "lock", "release", "--lock-id", id)
		if code != exitUsage || !strings.Contains(errs, "--lock-id") || !strings.Contains(errs, "malformed lockId") {
			t.Errorf("release --lock-id %q: exit %d, want 2\n%s\n%s", id, code, out, errs)
		}
		noSecrets(t, "message", out+errs, id)
	}
	if code, _, errs := c.run("", "lock", "release", "--lock-id", "-"); code != exitUsage || !strings.Contains(errs, "stdin") {
		t.Errorf("release --lock-id - with empty stdin: exit %d\n%s", code, errs)
	}
	if code, _, errs := c.run("", "lock", "release"); code != exitUsage || !strings.Contains(errs, "lock-id") {
		t.Errorf("release without --lock-id: exit %d\n%s", code, errs)
	}
	if n := rpcs.Load(); n != 0 {
		t.Errorf("%d RPCs for malformed lockIds", n)
	}
	if code, out, _ := c.run("", "lock", "status", "--key", "k"); code != exitOK || !strings.Contains(out, locking.HashKey(r.LockID)) {
		t.Errorf("the lock did not survive: exit %d\n%s", code, out)
	}
}

func TestLockHelp(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, args := range [][]string{{"lock", "--help"}, {"lock", "status", "--help"}, {"lock", "release", "--help"}} {
		code, out, _ := c.run("", args...)
		if code != exitOK || !strings.Contains(out, "Examples:") || !strings.Contains(out, "snapwriter lock") {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
	}
}

func TestLockUnknownSubcommandExit2(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	if code, _, errs := c.run("", "lock", "bogus"); code != exitUsage || !strings.Contains(errs, "bogus") {
		t.Errorf("lock bogus: exit %d\n%s", code, errs)
	}
}

func docsIn(t *testing.T, c *cli, coll string) []string {
	t.Helper()
	ds, err := c.client().Collection(coll).Documents(context.Background()).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.Ref.ID
	}
	return ids
}
