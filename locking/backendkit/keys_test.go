package backendkit

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/snapwriter/snapwriter/locking"
)

func TestNewLockID(t *testing.T) {
	form := regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)
	seen := make(map[string]bool, 10000)
	for range 10000 {
		id, err := NewLockID()
		if err != nil {
			t.Fatal(err)
		}
		if !form.MatchString(id) || locking.ValidateLockID(id) != nil {
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

// hashedID is the hashed form of a storage id, computed independently of
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
				if !errors.Is(err, locking.ErrInvalidArgument) {
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
	// Deterministic.
	a, _ := MakeStorageKey("", strings.Repeat("z", 2000), 1500, 0)
	b, _ := MakeStorageKey("", strings.Repeat("z", 2000), 1500, 0)
	if a != b || len(a) != 22 {
		t.Errorf("hashed ids %q, %q", a, b)
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
		if f, err := FormatFence(n); !errors.Is(err, locking.ErrInternal) || f != "" {
			t.Errorf("FormatFence(%d) = %q, %v; want Internal", n, f, err)
		}
	}
	for _, bad := range []string{"", "1", "00000000000000x", "0000000000000001", "+00000000000001", " 00000000000001", "0000000000000000042"} {
		if _, err := ParseFence(bad); !errors.Is(err, locking.ErrInternal) {
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
