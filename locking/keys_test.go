package locking

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestNormalizeAndValidateKey(t *testing.T) {
	cases := []struct {
		name, key, want string // want "" means InvalidArgument
	}{
		{"ascii", "snapshot:2026-11-20", "snapshot:2026-11-20"},
		{"NFC stays", "caf\u00e9", "caf\u00e9"},
		{"NFD composes", "cafe\u0301", "caf\u00e9"},
		{"Hangul jamo compose", "\u1100\u1161", "\uac00"},
		{"512 ASCII bytes", strings.Repeat("x", 512), strings.Repeat("x", 512)},
		{"512 bytes of 2-byte runes", strings.Repeat("\u00e9", 256), strings.Repeat("\u00e9", 256)},
		// 768 bytes as written, 512 after NFC: the limit counts the NFC form.
		{"768 NFD bytes, 512 NFC", strings.Repeat("e\u0301", 256), strings.Repeat("\u00e9", 256)},
		{"512 bytes of 3-byte runes", strings.Repeat("€", 170) + "ab", strings.Repeat("€", 170) + "ab"},
		{"512 bytes of 4-byte runes", strings.Repeat("😀", 128), strings.Repeat("😀", 128)},
		{"three dots", "...", "..."},
		{"dot prefix", ".a", ".a"},
		{"three underscores", "___", "___"},
		{"leading dunder only", "__x", "__x"},
		{"trailing dunder only", "x__", "x__"},
		{"single underscores", "_x_", "_x_"},

		{"empty", "", ""},
		{"513 ASCII bytes", strings.Repeat("x", 513), ""},
		{"514 bytes of 2-byte runes", strings.Repeat("\u00e9", 257), ""},
		{"515 bytes of 3-byte runes", strings.Repeat("€", 171) + "ab", ""},
		{"516 bytes of 4-byte runes", strings.Repeat("😀", 129), ""},
		{"slash", "a/b", ""},
		{"lone slash", "/", ""},
		{"trailing slash", "snapshot/", ""},
		{"dot", ".", ""},
		{"dot dot", "..", ""},
		{"dunder", "__x__", ""},
		{"four underscores", "____", ""},
		{"dunder with newline", "__a\nb__", ""},
		{"invalid UTF-8", "a\xffb", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := NormalizeAndValidateKey(c.key)
			if c.want != "" {
				if err != nil || got != c.want {
					t.Fatalf("= %q, %v; want %q", got, err, c.want)
				}
				return
			}
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("= %q, %v; want InvalidArgument", got, err)
			}
			var le *Error
			if !errors.As(err, &le) || le.Code != InvalidArgument {
				t.Fatalf("not an *Error: %T", err)
			}
			if len(c.key) > 3 && strings.Contains(err.Error(), c.key) {
				t.Errorf("message %q leaks the raw key", err.Error())
			}
		})
	}
}

func TestValidateLockID(t *testing.T) {
	for _, ok := range []string{"AAAAAAAAAAAAAAAAAAAAAA", "abcdefghijklmnopqrstuv", "0123456789-_ABCDEFabcd"} {
		if err := ValidateLockID(ok); err != nil {
			t.Errorf("ValidateLockID(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "short", strings.Repeat("a", 21), strings.Repeat("a", 23),
		strings.Repeat("a", 21) + "+", strings.Repeat("a", 21) + "/", strings.Repeat("a", 21) + "=",
		strings.Repeat("a", 21) + " ", strings.Repeat("a", 20) + "é", strings.Repeat("a", 21) + "\x00"} {
		err := ValidateLockID(bad)
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ValidateLockID(%q) = %v", bad, err)
		}
		if len(bad) > 4 && strings.Contains(err.Error(), bad) {
			t.Errorf("message %q leaks the lockId", err.Error())
		}
	}
}

func TestNewLockID(t *testing.T) {
	form := regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)
	seen := make(map[string]bool, 10000)
	for range 10000 {
		id, err := NewLockID()
		if err != nil {
			t.Fatal(err)
		}
		if !form.MatchString(id) || ValidateLockID(id) != nil {
			t.Fatalf("lockId %q has the wrong form", id)
		}
		if b, err := base64.RawURLEncoding.DecodeString(id); err != nil || len(b) != 16 {
			t.Fatalf("lockId %q is not 16 bytes of base64url: %v", id, err)
		}
		if seen[id] {
			t.Fatalf("lockId %q repeated", id)
		}
		seen[id] = true
	}
}

// hashedID is the DESIGN §4 truncated form, computed independently of
// MakeStorageKey: base64url of the first 16 bytes of SHA-256.
func hashedID(prefixed string) string {
	sum := sha256.Sum256([]byte(prefixed))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

func TestMakeStorageKey(t *testing.T) {
	long := strings.Repeat("k", 60)
	cases := []struct {
		name           string
		prefix, key    string
		limit, reserve int
		want           string // "" means InvalidArgument
	}{
		{"no prefix passes through", "", "snapshot:1", 1500, 0, "snapshot:1"},
		{"no prefix NFC", "", "cafe\u0301", 1500, 0, "caf\u00e9"},
		{"prefixed", "lock", "a", 100, 0, "lock:a"},
		{"exactly at the limit", "p", long, 62, 0, "p:" + long},
		{"one over: hashed", "p", long, 61, 0, "p:" + hashedID("p:"+long)},
		{"reserve pushes it over", "p", long, 64, 3, "p:" + hashedID("p:"+long)},
		{"reserve that still fits", "p", long, 64, 2, "p:" + long},
		{"no prefix hashed is the bare hash", "", long, 59, 0, hashedID(long)},
		// Bytes, not runes: 24 bytes of é fit in 24, not in 23.
		{"multibyte at the limit", "", strings.Repeat("\u00e9", 12), 24, 0, strings.Repeat("\u00e9", 12)},
		{"multibyte over", "", strings.Repeat("\u00e9", 12), 23, 0, hashedID(strings.Repeat("\u00e9", 12))},
		// The hash covers the NFC form, so NFD input hashes the same.
		{"NFD hashed as NFC", "", strings.Repeat("e\u0301", 12), 23, 0, hashedID(strings.Repeat("\u00e9", 12))},
		{"Firestore lock doc: a 512-byte key fits", "", strings.Repeat("x", 512), 1500, 0, strings.Repeat("x", 512)},
		{"hash does not fit either", "p", long, 10, 0, ""},
		{"reserve leaves no room", "", long, 30, 10, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := MakeStorageKey(c.prefix, c.key, c.limit, c.reserve)
			if c.want == "" {
				if !errors.Is(err, ErrInvalidArgument) {
					t.Fatalf("= %q, %v; want InvalidArgument", got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("= %q, %v; want %q", got, err, c.want)
			}
			if len(got)+c.reserve > c.limit {
				t.Errorf("%q plus %d reserved is over %d bytes", got, c.reserve, c.limit)
			}
		})
	}
	// Deterministic, and the fence id derives from the lock id (DESIGN §4).
	a, _ := MakeStorageKey("", strings.Repeat("z", 2000), 1500, 0)
	b, _ := MakeStorageKey("", strings.Repeat("z", 2000), 1500, 0)
	if a != b || len(a) != 22 {
		t.Errorf("hashed ids %q, %q", a, b)
	}
}

func TestHashKey(t *testing.T) {
	sum := sha256.Sum256([]byte("snapshot:2026-11-20"))
	if got, want := HashKey("snapshot:2026-11-20"), hex.EncodeToString(sum[:])[:24]; got != want {
		t.Errorf("HashKey = %q, want %q", got, want)
	}
	if HashKey("caf\u00e9") != HashKey("cafe\u0301") {
		t.Error("NFC and NFD spellings hash differently")
	}
	if HashKey("a") == HashKey("b") || len(HashKey("")) != 24 {
		t.Error("HashKey is not a 24-hex-character hash")
	}
}

func TestFences(t *testing.T) {
	for n, want := range map[uint64]string{0: "000000000000000", 1: "000000000000001", 42: "000000000000042",
		FenceWarnThreshold: "090000000000000", MaxFence: "900000000000000"} {
		f, err := FormatFence(n)
		if f != want || err != nil {
			t.Errorf("FormatFence(%d) = %q, %v; want %q", n, f, err, want)
		}
		if p, err := ParseFence(want); p != n || err != nil {
			t.Errorf("ParseFence(%q) = %d, %v", want, p, err)
		}
	}
	for _, n := range []uint64{MaxFence + 1, math.MaxUint64} {
		if f, err := FormatFence(n); !errors.Is(err, ErrInternal) || f != "" {
			t.Errorf("FormatFence(%d) = %q, %v; want Internal", n, f, err)
		}
	}
	for _, bad := range []string{"", "1", "00000000000000x", "0000000000000001", "+00000000000001", " 00000000000001", "0000000000000000042"} {
		if _, err := ParseFence(bad); !errors.Is(err, ErrInternal) {
			t.Errorf("ParseFence(%q) = %v; want Internal", bad, err)
		}
	}
	for f, want := range map[string]bool{"090000000000000": false, "090000000000001": true, "000000000000001": false,
		"900000000000000": true, "": false, "1": false} {
		if FenceNeedsWarning(f) != want {
			t.Errorf("FenceNeedsWarning(%q) = %v", f, !want)
		}
	}
	// Fences order as strings exactly as their counters do.
	rapid.Check(t, func(rt *rapid.T) {
		a := rapid.Uint64Range(0, MaxFence).Draw(rt, "a")
		b := rapid.Uint64Range(0, MaxFence).Draw(rt, "b")
		fa, _ := FormatFence(a)
		fb, _ := FormatFence(b)
		if (a < b) != (fa < fb) || (a == b) != (fa == fb) {
			rt.Fatalf("%d vs %d orders differently as %q vs %q", a, b, fa, fb)
		}
	})
}

func TestIsLive(t *testing.T) {
	now := int64(1_700_000_000_000)
	for _, c := range []struct {
		expires int64
		want    bool
	}{
		{now + 30_000, true},
		{now + 1, true},
		{now, true},
		{now - 1, true},
		{now - 999, true},
		{now - 1000, false}, // expiresAtMs > nowMs − 1000 is strict
		{now - 1001, false},
		{0, false},
	} {
		if got := IsLive(c.expires, now); got != c.want {
			t.Errorf("IsLive(now%+d) = %v", c.expires-now, got)
		}
	}
	if TimeTolerance.Milliseconds() != 1000 {
		t.Errorf("TimeTolerance = %s", TimeTolerance)
	}
}

func TestDefaultRetryPolicy(t *testing.T) {
	want := RetryPolicy{MaxRetries: 10, RetryDelay: 100 * time.Millisecond, Backoff: Exponential, Jitter: EqualJitter, Timeout: 5 * time.Second}
	if got := DefaultRetryPolicy(); got != want {
		t.Errorf("DefaultRetryPolicy() = %+v", got)
	}
}

// The lock() helper's formulas for every backoff × jitter: base =
// delay·2^(n−1) or delay; equal jitter base/2 + u·base/2, full u·base, none
// base.
func TestPropertyRetryDelay(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := RetryPolicy{
			RetryDelay: time.Duration(rapid.Int64Range(0, int64(10*time.Second)).Draw(rt, "delay")),
			Backoff:    BackoffKind(rapid.IntRange(0, 1).Draw(rt, "backoff")),
			Jitter:     JitterKind(rapid.IntRange(0, 2).Draw(rt, "jitter")),
		}
		n := rapid.IntRange(1, 20).Draw(rt, "attempt")
		u := rapid.Float64Range(0, 1).Filter(func(u float64) bool { return u < 1 }).Draw(rt, "u")
		base := float64(p.RetryDelay)
		if p.Backoff == Exponential {
			base *= float64(uint64(1) << (n - 1))
		}
		var want, lo, hi float64
		switch p.Jitter {
		case EqualJitter:
			want, lo, hi = base/2+u*base/2, base/2, base
		case FullJitter:
			want, lo, hi = u*base, 0, base
		case NoJitter:
			want, lo, hi = base, base, base
		}
		d := float64(p.Delay(n, u))
		if d < lo-1 || d > hi {
			rt.Fatalf("Delay(%d, %v) = %v, outside [%v, %v] for %+v", n, u, d, lo, hi, p)
		}
		if math.Abs(d-want) > 1 {
			rt.Fatalf("Delay(%d, %v) = %v, want %v for %+v", n, u, d, want, p)
		}
		// More randomness never waits less; Fixed never grows.
		v := rapid.Float64Range(0, 1).Filter(func(v float64) bool { return v < 1 }).Draw(rt, "v")
		if u2 := u + (1-u)*v; p.Delay(n, u2) < p.Delay(n, u) {
			rt.Fatalf("Delay not monotone in u")
		}
		if p.Backoff == Fixed && p.Delay(n, u) != p.Delay(1, u) {
			rt.Fatalf("Fixed backoff grew with the attempt")
		}
	})
}

func TestRetryDelayEdges(t *testing.T) {
	p := RetryPolicy{RetryDelay: 100 * time.Millisecond, Backoff: Exponential, Jitter: NoJitter}
	if p.Delay(0, 0) != 100*time.Millisecond || p.Delay(-3, 0) != 100*time.Millisecond {
		t.Error("attempts below 1 do not count as the first")
	}
	if p.Delay(3, 0) != 400*time.Millisecond {
		t.Errorf("Delay(3) = %s", p.Delay(3, 0))
	}
	// Saturates instead of overflowing: the writer polls with MaxRetries 1<<20.
	for _, n := range []int{63, 64, 1000, 1 << 20} {
		if d := p.Delay(n, 0.5); d <= 0 {
			t.Errorf("Delay(%d) = %s", n, d)
		}
	}
	for _, bad := range []RetryPolicy{{MaxRetries: -1}, {RetryDelay: -1}, {Timeout: -1}, {Backoff: 2}, {Jitter: 3}, {Jitter: -1}} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Validate(%+v) = %v", bad, err)
		}
	}
}

func TestValidateTTL(t *testing.T) {
	for _, ok := range []time.Duration{time.Millisecond, 300 * time.Millisecond, 30 * time.Second} {
		if err := ValidateTTL(ok); err != nil {
			t.Errorf("ValidateTTL(%s) = %v", ok, err)
		}
	}
	for _, bad := range []time.Duration{0, -time.Second, time.Microsecond, 1500 * time.Microsecond} {
		if err := ValidateTTL(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ValidateTTL(%s) = %v", bad, err)
		}
	}
}

func TestErrors(t *testing.T) {
	cause := errors.New("held")
	e := &Error{Code: AcquisitionTimeout, Op: "acquire", KeyHash: HashKey("secret-key"), LockIDHash: HashKey("x"), Err: cause}
	if !errors.Is(e, ErrAcquisitionTimeout) || errors.Is(e, ErrAborted) || !errors.Is(e, cause) {
		t.Error("errors.Is by code and through to the cause")
	}
	// Only a cause-less *Error is a sentinel.
	if errors.Is(e, &Error{Code: AcquisitionTimeout, Err: cause}) {
		t.Error("matched an *Error that has a cause")
	}
	if !errors.Is(e, &Error{Code: AcquisitionTimeout, Op: "other"}) {
		t.Error("did not match a cause-less *Error of the same code")
	}
	var le *Error
	if !errors.As(error(e), &le) || le.Code != AcquisitionTimeout || errors.Unwrap(e) != cause {
		t.Error("errors.As / Unwrap")
	}
	want := "locking: acquire: AcquisitionTimeout (key " + HashKey("secret-key") + ") (lockId " + HashKey("x") + "): held"
	if e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
	if ErrInternal.Error() != "locking: Internal" {
		t.Errorf("sentinel Error() = %q", ErrInternal.Error())
	}
	names := map[Code]string{ServiceUnavailable: "ServiceUnavailable", AuthFailed: "AuthFailed", InvalidArgument: "InvalidArgument",
		RateLimited: "RateLimited", NetworkTimeout: "NetworkTimeout", AcquisitionTimeout: "AcquisitionTimeout", Aborted: "Aborted",
		Internal: "Internal", 0: "Code(0)", 99: "Code(99)"}
	for c, n := range names {
		if c.String() != n {
			t.Errorf("Code(%d).String() = %q", int(c), c.String())
		}
	}
	sentinels := []*Error{ErrServiceUnavailable, ErrAuthFailed, ErrInvalidArgument, ErrRateLimited, ErrNetworkTimeout,
		ErrAcquisitionTimeout, ErrAborted, ErrInternal}
	for i, s := range sentinels {
		if s.Code != Code(i+1) || s.Err != nil {
			t.Errorf("sentinel %d = %+v", i, s)
		}
		for j, o := range sentinels {
			if errors.Is(&Error{Code: s.Code, Err: cause}, o) != (i == j) {
				t.Errorf("code %s matches sentinel %s: %v", s.Code, o.Code, i != j)
			}
		}
	}
}

// The spec's formulas, exactly, for each backoff and jitter.
func TestRetryDelayFormulas(t *testing.T) {
	const d = 100 * time.Millisecond
	for _, c := range []struct {
		b       BackoffKind
		j       JitterKind
		attempt int
		u       float64
		want    time.Duration
	}{
		{Exponential, NoJitter, 1, 0.3, d},
		{Exponential, NoJitter, 2, 0.3, 2 * d},
		{Exponential, NoJitter, 4, 0.3, 8 * d},
		{Exponential, EqualJitter, 3, 0, 2 * d},                        // base/2
		{Exponential, EqualJitter, 3, 0.5, 3 * d},                      // base/2 + base/4
		{Exponential, FullJitter, 3, 0.25, d},                          // base/4
		{Fixed, NoJitter, 5, 0.9, d},                                   // no growth
		{Fixed, EqualJitter, 5, 0.5, 75 * time.Millisecond},            // d/2 + d/4
		{Fixed, FullJitter, 7, 0.5, 50 * time.Millisecond},             // d/2
		{Exponential, EqualJitter, 1, 0.999, 99950 * time.Microsecond}, // just under base
	} {
		p := RetryPolicy{RetryDelay: d, Backoff: c.b, Jitter: c.j}
		if got := p.Delay(c.attempt, c.u); got != c.want {
			t.Errorf("%+v: Delay(%d, %v) = %s, want %s", p, c.attempt, c.u, got, c.want)
		}
	}
}
