package locking

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
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
