package locking

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestNormalizeAndValidateKey(t *testing.T) {
	nfd, nfc := "cafe\u0301", "caf\u00e9"
	if a, _ := NormalizeAndValidateKey(nfd); a != nfc {
		t.Errorf("NFD key normalised to %q, want %q", a, nfc)
	}
	// 512 bytes after NFC: 256 two-byte é is fine even though NFD would be 768.
	long := strings.Repeat("e\u0301", 256)
	if k, err := NormalizeAndValidateKey(long); err != nil || len(k) != 512 {
		t.Errorf("512-byte NFC key: %d bytes, %v", len(k), err)
	}
	for _, bad := range []string{"", strings.Repeat("x", 513), strings.Repeat("é", 257)} {
		_, err := NormalizeAndValidateKey(bad)
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("key of %d bytes: %v", len(bad), err)
		}
		if bad != "" && strings.Contains(err.Error(), bad) {
			t.Error("error message leaks the raw key")
		}
	}
}

func TestLockIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 10000 {
		id, err := NewLockID()
		if err != nil || ValidateLockID(id) != nil || seen[id] {
			t.Fatalf("lockId %q: %v, dup %v", id, err, seen[id])
		}
		seen[id] = true
	}
	for _, bad := range []string{"", "short", strings.Repeat("a", 23), strings.Repeat("a", 21) + "+", strings.Repeat("a", 21) + "="} {
		if err := ValidateLockID(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ValidateLockID(%q) = %v", bad, err)
		}
	}
}

func TestMakeStorageKey(t *testing.T) {
	if k, _ := MakeStorageKey("", "caf\u0065\u0301", 1500, 0); k != "caf\u00e9" {
		t.Errorf("short key = %q", k)
	}
	if k, _ := MakeStorageKey("lock", "a", 100, 0); k != "lock:a" {
		t.Errorf("prefixed = %q", k)
	}
	key := strings.Repeat("k", 60)
	sum := sha256.Sum256([]byte("p:" + key))
	want := "p:" + base64.RawURLEncoding.EncodeToString(sum[:16])
	if k, err := MakeStorageKey("p", key, 60, 0); k != want || err != nil {
		t.Errorf("truncated = %q, %v; want %q", k, err, want)
	}
	// reserve counts against the limit: 62 bytes fit in 64, not with 4 reserved.
	if k, _ := MakeStorageKey("p", key, 64, 0); k != "p:"+key {
		t.Errorf("fits: %q", k)
	}
	if k, _ := MakeStorageKey("p", key, 64, 4); k != want {
		t.Errorf("reserve ignored: %q", k)
	}
	if _, err := MakeStorageKey("p", key, 10, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("unfittable: %v", err)
	}
}

func TestHashKey(t *testing.T) {
	h := HashKey("caf\u00e9")
	if len(h) != 24 || h != HashKey("cafe\u0301") || h == HashKey("cafe") {
		t.Errorf("HashKey = %q", h)
	}
}

func TestFences(t *testing.T) {
	for n, want := range map[uint64]string{1: "000000000000001", 42: "000000000000042", MaxFence: "900000000000000"} {
		if f, err := FormatFence(n); f != want || err != nil {
			t.Errorf("FormatFence(%d) = %q, %v", n, f, err)
		}
		if p, err := ParseFence(want); p != n || err != nil {
			t.Errorf("ParseFence(%q) = %d, %v", want, p, err)
		}
	}
	if _, err := FormatFence(MaxFence + 1); !errors.Is(err, ErrInternal) {
		t.Errorf("overflow: %v", err)
	}
	for _, bad := range []string{"1", "00000000000000x", "0000000000000001"} {
		if _, err := ParseFence(bad); err == nil {
			t.Errorf("ParseFence(%q) accepted", bad)
		}
	}
	if FenceNeedsWarning("090000000000000") || !FenceNeedsWarning("090000000000001") {
		t.Error("warning threshold")
	}
	a, _ := FormatFence(9)
	b, _ := FormatFence(10)
	if !(b > a) {
		t.Error("fences do not order as strings")
	}
}

func TestIsLive(t *testing.T) {
	now := int64(1_000_000)
	for exp, want := range map[int64]bool{now + 1: true, now: true, now - 999: true, now - 1000: false, now - 5000: false} {
		if IsLive(exp, now) != want {
			t.Errorf("IsLive(now%+d) = %v", exp-now, !want)
		}
	}
}

// The lock() helper's formulas: exponential base·2^(n−1), fixed base, and
// equal / full / no jitter.
func TestPropertyRetryDelay(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := DefaultRetryPolicy()
		p.Backoff = BackoffKind(rapid.IntRange(0, 1).Draw(rt, "backoff"))
		p.Jitter = JitterKind(rapid.IntRange(0, 2).Draw(rt, "jitter"))
		n := rapid.IntRange(1, 20).Draw(rt, "attempt")
		u := rapid.Float64Range(0, 0.999999).Draw(rt, "u")
		base := p.RetryDelay
		if p.Backoff == Exponential {
			base <<= n - 1
		}
		d := p.Delay(n, u)
		lo, hi := base, base
		switch p.Jitter {
		case EqualJitter:
			lo = base / 2
		case FullJitter:
			lo = 0
		}
		if d < lo-1 || d > hi {
			rt.Fatalf("Delay(%d, %v) = %s, want in [%s, %s] for %+v", n, u, d, lo, hi, p)
		}
	})
}

// fakeBackend is an in-memory Backend for testing Acquire and Lease logic.
type fakeBackend struct {
	mu       sync.Mutex
	holder   map[string]string // key → lockId
	expires  map[string]time.Time
	extends  int
	extendOK bool
	extendFn func() (ExtendResult, error)
	acquires int
	releases int
}

func newFake() *fakeBackend {
	return &fakeBackend{holder: map[string]string{}, expires: map[string]time.Time{}, extendOK: true}
}

func (f *fakeBackend) Acquire(_ context.Context, key string, ttl time.Duration) (AcquireResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acquires++
	if id, ok := f.holder[key]; ok && time.Now().Before(f.expires[id]) {
		return AcquireResult{}, nil
	}
	id, _ := NewLockID()
	f.holder[key] = id
	f.expires[id] = time.Now().Add(ttl)
	return AcquireResult{OK: true, LockID: id, ExpiresAt: f.expires[id], Fence: "000000000000001"}, nil
}

func (f *fakeBackend) Release(_ context.Context, lockID string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releases++
	for k, id := range f.holder {
		if id == lockID {
			delete(f.holder, k)
			return true, nil
		}
	}
	return false, nil
}

func (f *fakeBackend) Extend(_ context.Context, lockID string, ttl time.Duration) (ExtendResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.extends++
	if f.extendFn != nil {
		return f.extendFn()
	}
	if !f.extendOK {
		return ExtendResult{}, nil
	}
	f.expires[lockID] = time.Now().Add(ttl)
	return ExtendResult{OK: true, ExpiresAt: f.expires[lockID]}, nil
}

func (f *fakeBackend) IsLocked(context.Context, string) (bool, error)          { return false, nil }
func (f *fakeBackend) LookupKey(context.Context, string) (*LockInfo, error)    { return nil, nil }
func (f *fakeBackend) LookupLockID(context.Context, string) (*LockInfo, error) { return nil, nil }
func (f *fakeBackend) Capabilities() Capabilities                              { return Capabilities{Backend: "fake"} }
func (f *fakeBackend) set(fn func(*fakeBackend))                               { f.mu.Lock(); fn(f); f.mu.Unlock() }
func (f *fakeBackend) get(fn func(*fakeBackend) int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fn(f)
}

func TestAcquireWaitsThenTimesOut(t *testing.T) {
	f := newFake()
	first, err := Acquire(context.Background(), f, "k", WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Release(context.Background())
	p := RetryPolicy{MaxRetries: 100, RetryDelay: 5 * time.Millisecond, Backoff: Fixed, Jitter: NoJitter, Timeout: 60 * time.Millisecond}
	start := time.Now()
	_, err = Acquire(context.Background(), f, "k", WithRetry(p))
	if !errors.Is(err, ErrAcquisitionTimeout) {
		t.Fatalf("err = %v", err)
	}
	if el := time.Since(start); el < 50*time.Millisecond || el > time.Second {
		t.Errorf("gave up after %s, want ≈ the 60ms timeout", el)
	}
	if n := f.get(func(f *fakeBackend) int { return f.acquires }); n < 5 {
		t.Errorf("%d attempts, want several", n)
	}
	// MaxRetries 0: exactly one attempt.
	before := f.get(func(f *fakeBackend) int { return f.acquires })
	p.MaxRetries = 0
	if _, err := Acquire(context.Background(), f, "k", WithRetry(p)); !errors.Is(err, ErrAcquisitionTimeout) {
		t.Fatalf("single attempt: %v", err)
	}
	if n := f.get(func(f *fakeBackend) int { return f.acquires }) - before; n != 1 {
		t.Errorf("%d attempts with MaxRetries 0", n)
	}
}

func TestAcquireSucceedsWhenReleasedMeanwhile(t *testing.T) {
	f := newFake()
	first, _ := Acquire(context.Background(), f, "k")
	go func() { time.Sleep(30 * time.Millisecond); _ = first.Release(context.Background()) }()
	l, err := Acquire(context.Background(), f, "k", WithRetry(RetryPolicy{MaxRetries: 50, RetryDelay: 5 * time.Millisecond, Timeout: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(context.Background())
}

func TestAcquireAbortedAndInvalid(t *testing.T) {
	f := newFake()
	held, _ := Acquire(context.Background(), f, "k")
	defer held.Release(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	start := time.Now()
	_, err := Acquire(ctx, f, "k", WithRetry(RetryPolicy{MaxRetries: 1000, RetryDelay: time.Second, Timeout: time.Hour}))
	if !errors.Is(err, ErrAborted) || time.Since(start) > 500*time.Millisecond {
		t.Errorf("cancelled wait: %v after %s", err, time.Since(start))
	}
	before := f.get(func(f *fakeBackend) int { return f.acquires })
	for _, c := range []struct {
		key string
		opt AcquireOption
	}{{"", nil}, {strings.Repeat("x", 600), nil}, {"k2", WithTTL(0)}, {"k2", WithTTL(1500 * time.Microsecond)}} {
		opts := []AcquireOption{}
		if c.opt != nil {
			opts = append(opts, c.opt)
		}
		if _, err := Acquire(context.Background(), f, c.key, opts...); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("key %d bytes: %v", len(c.key), err)
		}
	}
	if f.get(func(f *fakeBackend) int { return f.acquires }) != before {
		t.Error("invalid input reached the backend")
	}
}

func TestLeaseHeartbeatExtends(t *testing.T) {
	f := newFake()
	l, err := Acquire(context.Background(), f, "k", WithTTL(90*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	first := l.ExpiresAt()
	time.Sleep(250 * time.Millisecond)
	if n := f.get(func(f *fakeBackend) int { return f.extends }); n < 4 {
		t.Errorf("%d extends in 250ms at a 30ms interval", n)
	}
	if !l.ExpiresAt().After(first) || l.Err() != nil {
		t.Errorf("expiry not advanced (%v) or lease lost: %v", l.ExpiresAt(), l.Err())
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := f.get(func(f *fakeBackend) int { return f.extends })
	time.Sleep(100 * time.Millisecond)
	if f.get(func(f *fakeBackend) int { return f.extends }) != n {
		t.Error("heartbeat still running after Release")
	}
	select {
	case <-l.Done():
	default:
		t.Error("Done not closed by Release")
	}
	if l.Release(context.Background()) != nil || f.get(func(f *fakeBackend) int { return f.releases }) != 1 {
		t.Error("second Release was not a no-op")
	}
}

func TestLeaseLostWhenExtendRefused(t *testing.T) {
	f := newFake()
	l, _ := Acquire(context.Background(), f, "k", WithTTL(60*time.Millisecond))
	ctx, cancel := l.Context(context.Background())
	defer cancel()
	f.set(func(f *fakeBackend) { f.extendOK = false })
	select {
	case <-l.Done():
	case <-time.After(time.Second):
		t.Fatal("lease not lost")
	}
	<-ctx.Done()
	if !errors.Is(l.Err(), ErrLeaseLost) || !errors.Is(context.Cause(ctx), ErrLeaseLost) {
		t.Errorf("Err %v, cause %v", l.Err(), context.Cause(ctx))
	}
	if err := l.Release(context.Background()); err != nil {
		t.Errorf("release of a lost lease: %v", err)
	}
}

func TestLeaseLostWhenExtendFailsUntilExpiry(t *testing.T) {
	f := newFake()
	l, _ := Acquire(context.Background(), f, "k", WithTTL(90*time.Millisecond))
	f.set(func(f *fakeBackend) {
		f.extendFn = func() (ExtendResult, error) { return ExtendResult{}, ErrServiceUnavailable }
	})
	start := time.Now()
	<-l.Done()
	if el := time.Since(start); el < 60*time.Millisecond {
		t.Errorf("lost after %s, before the lock's expiry", el)
	}
	if !errors.Is(l.Err(), ErrLeaseLost) || !errors.Is(l.Err(), ErrServiceUnavailable) {
		t.Errorf("Err = %v", l.Err())
	}
	_ = l.Release(context.Background())
}

func TestDo(t *testing.T) {
	f := newFake()
	boom := errors.New("boom")
	err := Do(context.Background(), f, "k", func(ctx context.Context) error { return boom })
	if !errors.Is(err, boom) || f.get(func(f *fakeBackend) int { return f.releases }) != 1 {
		t.Errorf("Do = %v; releases %d", err, f.releases)
	}
	ran := false
	if err := Do(context.Background(), f, "k", func(ctx context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("Do = %v", err)
	}
	// A lease lost during fn is reported even if fn ignores its context.
	err = Do(context.Background(), f, "k", func(ctx context.Context) error {
		f.set(func(f *fakeBackend) { f.extendOK = false })
		<-ctx.Done()
		return nil
	}, WithTTL(30*time.Millisecond))
	if !errors.Is(err, ErrLeaseLost) {
		t.Errorf("lost lease: %v", err)
	}
}

func TestErrorMessagesAndIs(t *testing.T) {
	e := &Error{Code: AcquisitionTimeout, Op: "acquire", KeyHash: HashKey("secret-key"), Err: errors.New("held")}
	if !errors.Is(e, ErrAcquisitionTimeout) || errors.Is(e, ErrAborted) {
		t.Error("errors.Is by code")
	}
	if strings.Contains(e.Error(), "secret-key") || !strings.Contains(e.Error(), "AcquisitionTimeout") {
		t.Errorf("Error() = %q", e.Error())
	}
}
