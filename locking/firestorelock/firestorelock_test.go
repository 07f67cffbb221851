package firestorelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/backendkit"
	"github.com/snapwriter/snapwriter/retry/policy"
)

var emu *emulator.Emulator

func TestMain(m *testing.M) { os.Exit(emulator.Main(m, &emu)) }

var fenceForm = regexp.MustCompile(`^[0-9]{15}$`)

func newBackend(t *testing.T, opts ...Option) (*Backend, *firestore.Client) {
	t.Helper()
	c := emu.TestClient(t)
	b, err := New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, c
}

// clock is a settable clock for WithClock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func docs(t *testing.T, c *firestore.Client, coll string) []*firestore.DocumentSnapshot {
	t.Helper()
	ds, err := c.Collection(coll).Documents(context.Background()).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func mustAcquire(t *testing.T, b *Backend, key string, ttl time.Duration) locking.AcquireResult {
	t.Helper()
	r, err := b.Acquire(context.Background(), key, ttl)
	if err != nil || !r.OK {
		t.Fatalf("Acquire(%q): %+v, %v", key, r, err)
	}
	return r
}

// Mutual exclusion: of many concurrent acquirers of one key, exactly one
// wins, round after round, and each round's fence is above the last.
// Losers answer "held", or ErrContended when their transaction lost to the
// others for all its client attempts (see acquireTxAttempts).
func TestConcurrentAcquireExactlyOneWins(t *testing.T) {
	t.Parallel()
	b, _ := newBackend(t)
	ctx := context.Background()
	prev := ""
	for round := range 5 {
		var wins, contended atomic.Int32
		var mu sync.Mutex
		var winner locking.AcquireResult
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := b.Acquire(ctx, "contended", time.Minute)
				switch {
				case errors.Is(err, locking.ErrContended):
					// A loser whose transaction kept losing to the others
					// for its 3 client attempts: not a win, and what
					// locking.Acquire retries.
					contended.Add(1)
					return
				case err != nil:
					t.Errorf("round %d: %v", round, err)
					return
				}
				if r.OK {
					wins.Add(1)
					mu.Lock()
					winner = r
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d winners (%d contended)", round, wins.Load(), contended.Load())
		}
		if contended.Load() > 0 {
			t.Logf("round %d: %d of 20 answered contended", round, contended.Load())
		}
		if winner.Fence <= prev {
			t.Fatalf("round %d: fence %s after %s", round, winner.Fence, prev)
		}
		prev = winner.Fence
		if ok, err := b.Release(ctx, winner.LockID); !ok || err != nil {
			t.Fatalf("round %d: release %v, %v", round, ok, err)
		}
	}
}

// Fences are 15 digits and strictly increase over 100 acquisitions, and
// the counter outlives every release.
func TestFencesIncreaseAndCountersSurvive(t *testing.T) {
	t.Parallel()
	b, c := newBackend(t)
	ctx := context.Background()
	prev := ""
	for i := range 100 {
		r := mustAcquire(t, b, "job", time.Minute)
		if !fenceForm.MatchString(r.Fence) || r.Fence <= prev {
			t.Fatalf("acquire %d: fence %q after %q", i, r.Fence, prev)
		}
		prev = r.Fence
		if ok, err := b.Release(ctx, r.LockID); !ok || err != nil {
			t.Fatalf("release %d: %v, %v", i, ok, err)
		}
	}
	if prev != "000000000000100" {
		t.Errorf("last fence %s, want 000000000000100", prev)
	}
	if n := len(docs(t, c, DefaultLockCollection)); n != 0 {
		t.Errorf("%d lock documents left after release", n)
	}
	counters := docs(t, c, DefaultFenceCollection)
	if len(counters) != 1 || counters[0].Ref.ID != "fence:job" || counters[0].Data()["fence"] != "000000000000100" {
		t.Errorf("fence counters after release: %d docs, first %v", len(counters), counters[0].Data())
	}
	// The next holder continues the sequence.
	if r := mustAcquire(t, b, "job", time.Minute); r.Fence != "000000000000101" {
		t.Errorf("fence after the counter survived: %s", r.Fence)
	}
}

// Foreign lockIds change nothing; expiry (by the backend's clock) ends
// release and extend, extend never revives, and the next holder gets the
// next fence while the old lockId can touch nothing.
func TestLockIDsAndExpiry(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now()}
	b, c := newBackend(t, WithClock(clk.Now))
	ctx := context.Background()
	r := mustAcquire(t, b, "k", 10*time.Second)
	if r.ExpiresAt.UnixMilli() != clk.Now().Add(10*time.Second).UnixMilli() {
		t.Errorf("expiry %v, want now+ttl by the backend's clock", r.ExpiresAt)
	}

	foreign, _ := backendkit.NewLockID()
	if ok, err := b.Release(ctx, foreign); ok || err != nil {
		t.Errorf("release of a foreign lockId: %v, %v", ok, err)
	}
	if e, err := b.Extend(ctx, foreign, time.Minute); e.OK || err != nil {
		t.Errorf("extend of a foreign lockId: %+v, %v", e, err)
	}
	if info, err := b.LookupLockID(ctx, foreign); info != nil || err != nil {
		t.Errorf("lookup of a foreign lockId: %+v, %v", info, err)
	}
	if locked, _ := b.IsLocked(ctx, "k"); !locked {
		t.Error("foreign lockIds disturbed the lock")
	}

	// Extend resets to now+ttl; it does not add.
	clk.Advance(5 * time.Second)
	e, err := b.Extend(ctx, r.LockID, 3*time.Second)
	if !e.OK || err != nil || e.ExpiresAt.UnixMilli() != clk.Now().Add(3*time.Second).UnixMilli() {
		t.Errorf("extend: %+v, %v", e, err)
	}
	snap, _ := c.Collection(DefaultLockCollection).Doc("k").Get(ctx)
	if snap.Data()["expiresAtMs"] != e.ExpiresAt.UnixMilli() {
		t.Errorf("stored expiry %v, reported %d", snap.Data()["expiresAtMs"], e.ExpiresAt.UnixMilli())
	}

	// Within the tolerance after expiry the lock is still live.
	clk.Advance(3*time.Second + locking.TimeTolerance - time.Millisecond)
	if locked, _ := b.IsLocked(ctx, "k"); !locked {
		t.Error("lock not live within the tolerance")
	}
	// Past expiry plus tolerance: no extension (no resurrection), no
	// release, no lookup, and another owner takes it with the next fence.
	clk.Advance(time.Millisecond)
	if e, err := b.Extend(ctx, r.LockID, time.Minute); e.OK || err != nil {
		t.Errorf("extend revived an expired lock: %+v, %v", e, err)
	}
	if locked, _ := b.IsLocked(ctx, "k"); locked {
		t.Error("expired lock reported as locked")
	}
	if info, _ := b.LookupKey(ctx, "k"); info != nil {
		t.Errorf("lookup of an expired lock: %+v", info)
	}
	if info, _ := b.LookupLockID(ctx, r.LockID); info != nil {
		t.Errorf("lookup by lockId of an expired lock: %+v", info)
	}
	if ok, err := b.Release(ctx, r.LockID); ok || err != nil {
		t.Errorf("release of an expired lock: %v, %v", ok, err)
	}
	r2 := mustAcquire(t, b, "k", time.Minute)
	if r2.Fence != "000000000000002" || r2.LockID == r.LockID {
		t.Fatalf("takeover: %+v (old fence %s)", r2, r.Fence)
	}
	if ok, _ := b.Release(ctx, r.LockID); ok {
		t.Error("old owner released the new owner's lock")
	}
	if e, _ := b.Extend(ctx, r.LockID, time.Minute); e.OK {
		t.Error("old owner extended the new owner's lock")
	}
	if ok, err := b.Release(ctx, r2.LockID); !ok || err != nil {
		t.Errorf("new owner's release: %v, %v", ok, err)
	}
	// At most once: the second release of the same lock reports false.
	if ok, err := b.Release(ctx, r2.LockID); ok || err != nil {
		t.Errorf("second release: %v, %v", ok, err)
	}
}

// A short TTL runs out and the lock passes on. The client's clock decides
// (WithClock), so moving it is expiry; the conformance suite waits for
// real expiry.
func TestShortTTLExpires(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now()}
	b, _ := newBackend(t, WithClock(clk.Now))
	ctx := context.Background()
	r := mustAcquire(t, b, "short", 100*time.Millisecond)
	clk.Advance(100*time.Millisecond + locking.TimeTolerance - time.Millisecond)
	if r2, _ := b.Acquire(ctx, "short", time.Minute); r2.OK {
		t.Fatal("acquired a live lock, a millisecond before its tolerance ran out")
	}
	clk.Advance(time.Millisecond)
	if e, err := b.Extend(ctx, r.LockID, time.Minute); e.OK || err != nil {
		t.Errorf("extend after expiry: %+v, %v", e, err)
	}
	if ok, err := b.Release(ctx, r.LockID); ok || err != nil {
		t.Errorf("release after expiry: %v, %v", ok, err)
	}
	if r2 := mustAcquire(t, b, "short", time.Minute); r2.Fence != "000000000000002" {
		t.Errorf("takeover fence %s", r2.Fence)
	}
}

// The stored layout is SyncGuard's: ids, field names and types.
func TestRawLayout(t *testing.T) {
	t.Parallel()
	b, c := newBackend(t)
	ctx := context.Background()
	nfd, nfc := "snapshot:cafe\u0301", "snapshot:caf\u00e9"
	r := mustAcquire(t, b, nfd, time.Minute)
	// The NFC spelling is the same lock.
	if r2, err := b.Acquire(ctx, nfc, time.Minute); r2.OK || err != nil {
		t.Errorf("NFC and NFD spellings are different locks: %+v, %v", r2, err)
	}

	locks := docs(t, c, DefaultLockCollection)
	if len(locks) != 1 || locks[0].Ref.ID != nfc {
		t.Fatalf("lock docs %d, id %q; want one with the NFC key as id", len(locks), locks[0].Ref.ID)
	}
	d := locks[0].Data()
	exp, ok1 := d["expiresAtMs"].(int64)
	acq, ok2 := d["acquiredAtMs"].(int64)
	if !ok1 || !ok2 {
		t.Errorf("expiresAtMs is %T, acquiredAtMs is %T; want int64", d["expiresAtMs"], d["acquiredAtMs"])
	}
	if exp-acq != 60_000 || exp != r.ExpiresAt.UnixMilli() || time.Since(time.UnixMilli(acq)).Abs() > 10*time.Second {
		t.Errorf("times: acquired %d, expires %d, reported %d", acq, exp, r.ExpiresAt.UnixMilli())
	}
	if fence, ok := d["fence"].(string); !ok || fence != "000000000000001" || fence != r.Fence {
		t.Errorf("fence %#v", d["fence"])
	}
	if d["lockId"] != r.LockID || d["key"] != nfd || len(d) != 5 {
		t.Errorf("lock doc = %v", d)
	}

	counters := docs(t, c, DefaultFenceCollection)
	if len(counters) != 1 || counters[0].Ref.ID != "fence:"+nfc {
		t.Fatalf("fence docs %d, id %q", len(counters), counters[0].Ref.ID)
	}
	if f := counters[0].Data(); f["fence"] != "000000000000001" || f["keyDebug"] != nfd || len(f) != 2 {
		t.Errorf("fence doc = %v", f)
	}

	// Sanitized lookups, by either spelling and by lockId.
	for _, k := range []string{nfc, nfd} {
		info, err := b.LookupKey(ctx, k)
		if err != nil || info == nil || info.KeyHash != locking.HashKey(nfc) || info.LockIDHash != locking.HashKey(r.LockID) ||
			info.Fence != r.Fence || !info.ExpiresAt.Equal(r.ExpiresAt) || info.AcquiredAt.UnixMilli() != acq {
			t.Errorf("LookupKey(%q) = %+v, %v", k, info, err)
		}
	}
	if info, err := b.LookupLockID(ctx, r.LockID); err != nil || info == nil || info.KeyHash != locking.HashKey(nfc) || info.Fence != r.Fence {
		t.Errorf("LookupLockID = %+v, %v", info, err)
	}
	if info, err := b.LookupKey(ctx, "nothing-here"); info != nil || err != nil {
		t.Errorf("LookupKey of a free key = %+v, %v", info, err)
	}
	if locked, err := b.IsLocked(ctx, "nothing-here"); locked || err != nil {
		t.Errorf("IsLocked of a free key = %v, %v", locked, err)
	}
	if got := b.Capabilities(); got != (locking.Capabilities{Backend: "firestore", SupportsFencing: true, TimeAuthority: "client"}) {
		t.Errorf("Capabilities = %+v", got)
	}
}

// Configured collections hold everything; the defaults hold nothing.
func TestWithCollections(t *testing.T) {
	t.Parallel()
	b, c := newBackend(t, WithCollections("myLocks", "myFences"))
	r := mustAcquire(t, b, "k", time.Minute)
	if len(docs(t, c, "myLocks")) != 1 || len(docs(t, c, "myFences")) != 1 ||
		len(docs(t, c, DefaultLockCollection))+len(docs(t, c, DefaultFenceCollection)) != 0 {
		t.Error("documents not in the configured collections")
	}
	if ok, err := b.Release(context.Background(), r.LockID); !ok || err != nil {
		t.Errorf("release: %v, %v", ok, err)
	}
}

// Documents another client wrote, with doubles for the times, are honoured:
// a live one blocks, an expired one is taken over with the next fence.
func TestForeignDocuments(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.UnixMilli(1_800_000_000_000)}
	b, c := newBackend(t, WithClock(clk.Now))
	ctx := context.Background()
	nowMs := float64(clk.Now().UnixMilli())
	seed := func(key, lockID string, expires float64) {
		t.Helper()
		if _, err := c.Collection("locks").Doc(key).Set(ctx, map[string]any{
			"lockId": lockID, "expiresAtMs": expires, "acquiredAtMs": nowMs - 5000.25, "key": key, "fence": "000000000000041",
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Collection("fence_counters").Doc("fence:"+key).Set(ctx, map[string]any{"fence": "000000000000041", "keyDebug": key}); err != nil {
			t.Fatal(err)
		}
	}
	liveID, expiredID, edgeID := "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB", "CCCCCCCCCCCCCCCCCCCCCC"
	seed("live", liveID, nowMs+60000.5)
	seed("expired", expiredID, nowMs-5000.5)
	// Half a millisecond inside the tolerance: live by SyncGuard's float
	// comparison, so live here too (rounding down would call it expired).
	seed("edge", edgeID, nowMs-1000+0.5)

	for _, k := range []string{"live", "edge"} {
		if r, err := b.Acquire(ctx, k, time.Minute); r.OK || err != nil {
			t.Errorf("acquired over a live foreign lock %q: %+v, %v", k, r, err)
		}
		if locked, err := b.IsLocked(ctx, k); !locked || err != nil {
			t.Errorf("live foreign lock %q not seen: %v", k, err)
		}
	}
	info, err := b.LookupLockID(ctx, liveID)
	if err != nil || info == nil || info.Fence != "000000000000041" || info.ExpiresAt.UnixMilli() != int64(nowMs)+60001 {
		t.Errorf("lookup of a foreign lock: %+v, %v", info, err)
	}
	// A foreign live lock extends and releases by its lockId.
	if e, err := b.Extend(ctx, liveID, time.Minute); !e.OK || err != nil {
		t.Errorf("extend of a foreign live lock: %+v, %v", e, err)
	}

	r, err := b.Acquire(ctx, "expired", time.Minute)
	if err != nil || !r.OK || r.Fence != "000000000000042" {
		t.Errorf("takeover of an expired foreign lock: %+v, %v", r, err)
	}
	if ok, _ := b.Release(ctx, expiredID); ok {
		t.Error("the expired foreign lockId released the new lock")
	}
	if ok, err := b.Release(ctx, liveID); !ok || err != nil {
		t.Errorf("release of a foreign live lock: %v, %v", ok, err)
	}
}

// A counter we cannot read stops acquisition rather than restarting fences.
func TestCorruptCounterRefused(t *testing.T) {
	t.Parallel()
	b, c := newBackend(t)
	ctx := context.Background()
	if _, err := c.Collection("fence_counters").Doc("fence:k").Set(ctx, map[string]any{"fence": "42"}); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Acquire(ctx, "k", time.Minute); r.OK || !errors.Is(err, locking.ErrInternal) {
		t.Errorf("acquire over a corrupt counter: %+v, %v", r, err)
	}
	if n := len(docs(t, c, "locks")); n != 0 {
		t.Errorf("%d lock docs written", n)
	}
}

func TestInvalidInputTouchesNothing(t *testing.T) {
	t.Parallel()
	var rpcs atomic.Int32
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		rpcs.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	project := emulator.ProjectID(t)
	b, err := New(emu.TestClientFor(t, project, count))
	if err != nil {
		t.Fatal(err)
	}
	c := emu.TestClientFor(t, project)
	ctx := context.Background()
	for _, key := range []string{"", "a/b", "/", ".", "..", "__x__", strings.Repeat("k", 513), "bad\xff"} {
		if _, err := b.Acquire(ctx, key, time.Minute); !errors.Is(err, locking.ErrInvalidArgument) {
			t.Errorf("Acquire(%q): %v", key, err)
		}
		if _, err := b.IsLocked(ctx, key); !errors.Is(err, locking.ErrInvalidArgument) {
			t.Errorf("IsLocked(%q): %v", key, err)
		}
		if _, err := b.LookupKey(ctx, key); !errors.Is(err, locking.ErrInvalidArgument) {
			t.Errorf("LookupKey(%q): %v", key, err)
		}
	}
	for _, ttl := range []time.Duration{0, -time.Second, time.Microsecond} {
		if _, err := b.Acquire(ctx, "ok", ttl); !errors.Is(err, locking.ErrInvalidArgument) {
			t.Errorf("Acquire ttl %s: %v", ttl, err)
		}
		if _, err := b.Extend(ctx, "AAAAAAAAAAAAAAAAAAAAAA", ttl); !errors.Is(err, locking.ErrInvalidArgument) {
			t.Errorf("Extend ttl %s: %v", ttl, err)
		}
	}
	for _, id := range []string{"", "not-a-lock-id", strings.Repeat("a", 23), strings.Repeat("a", 21) + "="} {
		if _, err := b.Release(ctx, id); !errors.Is(err, locking.ErrInvalidArgument) {
			t.Errorf("Release(%q): %v", id, err)
		}
		if _, err := b.Extend(ctx, id, time.Minute); !errors.Is(err, locking.ErrInvalidArgument) {
			t.Errorf("Extend(%q): %v", id, err)
		}
		if _, err := b.LookupLockID(ctx, id); !errors.Is(err, locking.ErrInvalidArgument) {
			t.Errorf("LookupLockID(%q): %v", id, err)
		}
	}
	// A cancelled context is Aborted, also before any I/O.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Acquire(cctx, "ok", time.Minute); !errors.Is(err, locking.ErrAborted) {
		t.Errorf("cancelled Acquire: %v", err)
	}
	if _, err := b.Release(cctx, "AAAAAAAAAAAAAAAAAAAAAA"); !errors.Is(err, locking.ErrAborted) {
		t.Errorf("cancelled Release: %v", err)
	}
	if n := rpcs.Load(); n != 0 {
		t.Errorf("%d RPCs for invalid input", n)
	}
	if n := len(docs(t, c, "locks")) + len(docs(t, c, "fence_counters")); n != 0 {
		t.Errorf("%d documents written for invalid input", n)
	}
	for _, opts := range [][]Option{{WithCollections("same", "same")}, {WithCollections("", "f")}, {WithCollections("l", "")},
		{WithCollections("a/b", "f")}, {WithCollections("l", "..")}, {WithCollections("__l__", "f")}, {WithClock(nil)}} {
		if _, err := New(c, opts...); !errors.Is(err, locking.ErrInvalidArgument) {
			t.Errorf("config accepted: %v", err)
		}
	}
	if _, err := New(nil); !errors.Is(err, locking.ErrInvalidArgument) {
		t.Errorf("nil client accepted: %v", err)
	}
}

// Duplicate lockIds (only a bug or a foreign client makes them) are refused,
// never guessed at.
func TestDuplicateLockIDRefused(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.WarnLevel)
	b, c := newBackend(t, WithLogger(zap.New(core)))
	ctx := context.Background()
	r := mustAcquire(t, b, "one", time.Minute)
	snap, err := c.Collection("locks").Doc("one").Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dup := snap.Data()
	dup["key"] = "two"
	if _, err := c.Collection("locks").Doc("two").Set(ctx, dup); err != nil {
		t.Fatal(err)
	}
	ok, err := b.Release(ctx, r.LockID)
	if ok || !errors.Is(err, locking.ErrInternal) {
		t.Errorf("release with a duplicate lockId: %v, %v", ok, err)
	}
	if err != nil && strings.Contains(err.Error(), r.LockID) {
		t.Errorf("error %q leaks the lockId", err)
	}
	if e, err := b.Extend(ctx, r.LockID, time.Minute); e.OK || !errors.Is(err, locking.ErrInternal) {
		t.Errorf("extend with a duplicate lockId: %+v, %v", e, err)
	}
	if info, err := b.LookupLockID(ctx, r.LockID); info != nil || !errors.Is(err, locking.ErrInternal) {
		t.Errorf("lookup with a duplicate lockId: %+v, %v", info, err)
	}
	if n := len(docs(t, c, "locks")); n != 2 {
		t.Errorf("%d lock docs: a refused release deleted something", n)
	}
	// Each refusal (release, extend, lookup) logged a warning, by hash only.
	if n := logs.FilterMessageSnippet("share one lockId").Len(); n < 3 {
		t.Errorf("%d duplicate-lockId warnings, want one per refused call (3)", n)
	}
	for _, entry := range logs.All() {
		for k, v := range entry.ContextMap() {
			if s, ok := v.(string); ok && strings.Contains(s, r.LockID) {
				t.Errorf("warning field %s carries the raw lockId", k)
			}
		}
	}
}

// Transport failures map to the contract's codes, and their messages,
// which quote document paths, are scrubbed of the key and lockId.
func TestErrorMappingOnTheWire(t *testing.T) {
	t.Parallel()
	const key = "tenant-7f3a:secret-project"
	for _, c := range []struct {
		code codes.Code
		want *locking.Error
	}{
		// Not Unavailable or ResourceExhausted: the client itself retries
		// those on Commit for up to a minute (see the next test).
		{codes.Internal, locking.ErrServiceUnavailable},
		{codes.PermissionDenied, locking.ErrAuthFailed},
		{codes.Unauthenticated, locking.ErrAuthFailed},
		{codes.DeadlineExceeded, locking.ErrNetworkTimeout},
		{codes.InvalidArgument, locking.ErrInvalidArgument},
		{codes.FailedPrecondition, locking.ErrInvalidArgument},
		{codes.NotFound, locking.ErrInternal},
		{codes.Unknown, locking.ErrInternal},
	} {
		t.Run(c.code.String(), func(t *testing.T) {
			t.Parallel()
			var lockID atomic.Value
			lockID.Store("")
			fail := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if strings.HasSuffix(method, "/Commit") {
					return status.Errorf(c.code, "commit failed for projects/p/databases/(default)/documents/locks/%s (lockId %s, %q)",
						key, lockID.Load(), key)
				}
				return invoker(ctx, method, req, reply, cc, opts...)
			}
			project := emulator.ProjectID(t)
			bad, err := New(emu.TestClientFor(t, project, fail))
			if err != nil {
				t.Fatal(err)
			}
			good, _ := New(emu.TestClientFor(t, project))
			ctx := context.Background()

			_, err = bad.Acquire(ctx, key, time.Minute)
			check := func(op string, err error) {
				t.Helper()
				var le *locking.Error
				if !errors.Is(err, c.want) || !errors.As(err, &le) || le.Op != op {
					t.Fatalf("%s: %v, want %s", op, err, c.want.Code)
				}
				if status.Code(err) != c.code {
					t.Errorf("%s: status.Code = %s, want the original %s", op, status.Code(err), c.code)
				}
				msg := err.Error()
				if strings.Contains(msg, key) || (lockID.Load() != "" && strings.Contains(msg, lockID.Load().(string))) {
					t.Errorf("%s: message leaks the key or lockId: %s", op, msg)
				}
				if !strings.Contains(msg, "<"+locking.HashKey(key)+">") {
					t.Errorf("%s: message lost its substance: %s", op, msg)
				}
			}
			check("acquire", err)

			r := mustAcquire(t, good, key, time.Minute)
			lockID.Store(r.LockID)
			_, err = bad.Release(ctx, r.LockID)
			check("release", err)
			_, err = bad.Extend(ctx, r.LockID, time.Minute)
			check("extend", err)
		})
	}
}

// The codes the Firestore client retries by itself surface only at the
// caller's deadline, as a timeout.
func TestClientRetriedCodesEndAtTheDeadline(t *testing.T) {
	t.Parallel()
	for _, code := range []codes.Code{codes.Unavailable, codes.ResourceExhausted} {
		fail := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if strings.HasSuffix(method, "/Commit") {
				return status.Error(code, "injected")
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		b, err := New(emu.TestClient(t, fail))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		_, err = b.Acquire(ctx, "k", time.Minute)
		cancel()
		if !errors.Is(err, locking.ErrNetworkTimeout) || time.Since(start) > 2*time.Second {
			t.Errorf("%s on commit: %v after %s", code, err, time.Since(start))
		}
	}
}

func TestClassifyAndScrub(t *testing.T) {
	ctx := context.Background()
	for err, want := range map[error]locking.Code{
		context.Canceled:                           locking.Aborted,
		fmt.Errorf("x: %w", context.Canceled):      locking.Aborted,
		context.DeadlineExceeded:                   locking.NetworkTimeout,
		status.Error(codes.Canceled, "x"):          locking.Aborted,
		status.Error(codes.Aborted, "contention"):  locking.ServiceUnavailable,
		status.Error(codes.Unavailable, "x"):       locking.ServiceUnavailable,
		status.Error(codes.ResourceExhausted, "x"): locking.RateLimited,
		status.Error(codes.PermissionDenied, "x"):  locking.AuthFailed,
		status.Error(codes.InvalidArgument, "x"):   locking.InvalidArgument,
		status.Error(codes.OutOfRange, "x"):        locking.Internal,
		errors.New("something else"):               locking.Internal,
	} {
		if got := classify(ctx, err); got != want {
			t.Errorf("classify(%v) = %s, want %s", err, got, want)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if got := classify(cctx, errors.New("transport closed")); got != locking.Aborted {
		t.Errorf("error under a cancelled context = %s", got)
	}

	orig := status.Error(codes.NotFound, `no document "locks/caf\u00e9 \"q\"" for AAAAAAAAAAAAAAAAAAAAAA`)
	s := backendkit.Scrub(orig, "caf\u00e9 \"q\"", "AAAAAAAAAAAAAAAAAAAAAA", "")
	if strings.Contains(s.Error(), "caf") || strings.Contains(s.Error(), "AAAAAAAAAAAAAAAAAAAAAA") {
		t.Errorf("scrubbed = %q", s.Error())
	}
	if !errors.Is(s, orig) || status.Code(s) != codes.NotFound {
		t.Error("scrubbing lost the original error")
	}
	if plain := errors.New("nothing secret"); backendkit.Scrub(plain, "k") != plain {
		t.Error("an error without secrets was wrapped")
	}
}

// A Lease on this backend keeps the lock alive by extending its document,
// and releases it with the counter left in place.
func TestLeaseHeartbeatOnFirestore(t *testing.T) {
	t.Parallel()
	b, c := newBackend(t)
	ctx := context.Background()
	l, err := locking.Acquire(ctx, b, "lease", locking.WithTTL(600*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	first := l.ExpiresAt()
	// The heartbeat runs on real time: wait for its first extension, due
	// at TTL/3. (That extended locks outlive their first expiry is the
	// conformance suite's ExtendKeepsAlive.)
	for deadline := time.Now().Add(10 * time.Second); !l.ExpiresAt().After(first); time.Sleep(10 * time.Millisecond) {
		if l.Err() != nil || time.Now().After(deadline) {
			t.Fatalf("no extension by the heartbeat: Err %v, expiry %v", l.Err(), l.ExpiresAt())
		}
	}
	snap, err := c.Collection("locks").Doc("lease").Get(ctx)
	if err != nil || snap.Data()["expiresAtMs"].(int64) <= first.UnixMilli() {
		t.Errorf("stored expiry not advanced: %v, %v", snap.Data(), err)
	}
	if r, _ := b.Acquire(ctx, "lease", time.Minute); r.OK {
		t.Error("acquired a lock its lease keeps alive")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(docs(t, c, "locks")); n != 0 {
		t.Errorf("%d lock docs after Release", n)
	}
	if n := len(docs(t, c, "fence_counters")); n != 1 {
		t.Errorf("%d fence counters after Release", n)
	}
}

// A Lease on this backend notices when its lock document disappears.
func TestLeaseLossOnDeletedLock(t *testing.T) {
	t.Parallel()
	b, c := newBackend(t)
	ctx := context.Background()
	const ttl = 600 * time.Millisecond
	l, err := locking.Acquire(ctx, b, "lease", locking.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := l.Context(ctx)
	defer cancel()
	if _, err := c.Collection("locks").Doc("lease").Delete(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case <-l.Done():
	case <-time.After(3 * ttl):
		t.Fatal("lease not lost after its lock was deleted")
	}
	if el := time.Since(start); el > ttl {
		t.Errorf("loss noticed after %s, want within the %s TTL", el, ttl)
	}
	<-lctx.Done()
	if !errors.Is(l.Err(), locking.ErrLeaseLost) || !errors.Is(context.Cause(lctx), locking.ErrLeaseLost) {
		t.Errorf("Err %v, cause %v", l.Err(), context.Cause(lctx))
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release of a lost lease: %v", err)
	}
	// Someone else may have it now, with the next fence.
	if r := mustAcquire(t, b, "lease", time.Minute); r.Fence != "000000000000002" {
		t.Errorf("next fence %s", r.Fence)
	}
}

// Do on this backend: exclusive across goroutines, each run with its own
// fence.
func TestDoOnFirestore(t *testing.T) {
	t.Parallel()
	b, _ := newBackend(t)
	var inside atomic.Int32
	var mu sync.Mutex
	fences := map[string]bool{}
	var wg sync.WaitGroup
	p := locking.RetryPolicy{Initial: 10 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 1, MaxRetries: policy.Unlimited, TotalTimeout: 60 * time.Second}
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := locking.Do(context.Background(), b, "do", func(ctx context.Context, l *locking.Lease) error {
				if inside.Add(1) != 1 {
					t.Error("two holders at once")
				}
				info, err := b.LookupKey(ctx, "do")
				if err != nil || info == nil || info.Fence != l.Fence() {
					return fmt.Errorf("lookup inside Do: %+v, %v; want the lease's fence %s", info, err, l.Fence())
				}
				mu.Lock()
				fences[l.Fence()] = true
				mu.Unlock()
				time.Sleep(20 * time.Millisecond) // hold the lock a while, so that an overlap would show
				inside.Add(-1)
				return nil
			}, locking.WithTTL(5*time.Second), locking.WithRetry(p))
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if len(fences) != 6 {
		t.Errorf("%d distinct fences for 6 runs", len(fences))
	}
}

// A transaction that read the lock document and died (a holder killed
// inside an extension: Firestore keeps its locks for 60 s) makes Acquire
// fail with ServiceUnavailable matching locking.ErrContended within a few
// seconds, so that locking.Acquire can wait it out under ContentionWait
// instead of taking it for an unreachable store.
func TestAcquireReportsAStalledTransaction(t *testing.T) {
	b, c := newBackend(t)
	const key = "stalled-by-a-dead-extension"
	first := mustAcquire(t, b, key, time.Second)
	// Expired now (beyond the liveness tolerance).
	ref := c.Collection(DefaultLockCollection).Doc(key)
	if _, err := ref.Update(context.Background(), []firestore.Update{{Path: fieldExpiresAt, Value: time.Now().Add(-time.Minute).UnixMilli()}}); err != nil {
		t.Fatal(err)
	}
	// The dead extension: it read the document and never commits. Rolled
	// back at cleanup, which frees the document for other tests.
	held, dead := make(chan struct{}), make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_ = c.RunTransaction(context.Background(), func(_ context.Context, tx *firestore.Transaction) error {
			if _, err := tx.Get(ref); err != nil {
				return err
			}
			close(held)
			<-dead
			return errors.New("abandoned")
		}, firestore.MaxAttempts(1))
	}()
	t.Cleanup(func() { close(dead); <-ended })
	<-held
	start := time.Now()
	_, err := b.Acquire(context.Background(), key, time.Minute)
	if !errors.Is(err, locking.ErrServiceUnavailable) || !errors.Is(err, locking.ErrContended) {
		t.Fatalf("Acquire with the lock document locked by a dead transaction = %v; want ServiceUnavailable matching ErrContended", err)
	}
	if el := time.Since(start); el > 15*time.Second {
		t.Errorf("Acquire took %s to report the contention; want a few seconds (the client's 3 attempts)", el)
	}
	if strings.Contains(err.Error(), first.LockID) || strings.Contains(err.Error(), key) {
		t.Errorf("the error quotes the key or lockId: %v", err)
	}
	t.Logf("reported after %s: %v", time.Since(start).Round(time.Millisecond), err)
}
