package locktest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/backendkit"
)

// hashForm is HashKey's output: 24 lowercase hex characters.
var hashForm = regexp.MustCompile(`^[0-9a-f]{24}$`)

// testLookupReadOnly: lookup (by key and by lockId) and isLocked are
// read-only: repeated calls, spread over time, leave the expiry,
// acquisition time and fence exactly as they were and write nothing; a
// free key and an unknown lockId give nil without creating anything.
func testLookupReadOnly(t *testing.T, b locking.Backend) {
	ctx := t.Context()
	r := MustAcquire(t, b, "read-only", 10*time.Second)
	base, err := b.LookupLockID(ctx, r.LockID)
	if err != nil || base == nil {
		t.Fatalf("LookupLockID = %+v, %v", base, err)
	}
	n := records(t, b)
	same := func(what string, info *locking.LockInfo, err error) {
		t.Helper()
		if err != nil || info == nil || !equalInfo(*info, *base) {
			t.Errorf("%s = %+v, %v; want %+v unchanged", what, info, err, *base)
		}
	}
	for i := range 3 {
		for range 5 {
			info, err := b.LookupKey(ctx, "read-only")
			same("LookupKey", info, err)
			info, err = b.LookupLockID(ctx, r.LockID)
			same("LookupLockID", info, err)
			info, err = locking.GetByID(ctx, b, r.LockID)
			same("locking.GetByID", info, err)
			wantLocked(t, b, "read-only", true, "during lookups")
			if owned, err := locking.Owns(ctx, b, r.LockID); !owned || err != nil {
				t.Errorf("locking.Owns = %v, %v; want true", owned, err)
			}
		}
		if i < 2 {
			time.Sleep(150 * time.Millisecond) // spread over time, so that a lookup that moved the expiry would show
		}
	}
	wantRecords(t, b, n, "after lookups")
	// Reads of what is not there create nothing.
	unknown, _ := backendkit.NewLockID()
	for range 3 {
		if info, err := b.LookupKey(ctx, "read-only-free"); info != nil || err != nil {
			t.Errorf("LookupKey(free key) = %+v, %v; want nil, nil", info, err)
		}
		wantLocked(t, b, "read-only-free", false, "free key")
		if info, err := b.LookupLockID(ctx, unknown); info != nil || err != nil {
			t.Errorf("LookupLockID(unknown) = %+v, %v; want nil, nil", info, err)
		}
	}
	wantRecords(t, b, n, "after lookups of a free key and an unknown lockId")
	// Lookups never extended the lock: it expires on schedule. (Checked
	// with a fresh short lock so as not to wait 10 s.)
	s := MustAcquire(t, b, "read-only-short", 300*time.Millisecond)
	stop := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(stop) {
		_, _ = b.LookupKey(ctx, "read-only-short")
		_, _ = b.LookupLockID(ctx, s.LockID)
		_, _ = b.IsLocked(ctx, "read-only-short")
	}
	awaitExpiry(t, b, "read-only-short", s.ExpiresAt, "past the expiry of a lock that was only looked up")
}

// testLookupSanitized: lookup returns only hashes (HashKey of the key and
// of the lockId, never the raw values), the same shape by key and by
// lockId, the fence, and the expiry and acquisition times (Unix ms).
func testLookupSanitized(t *testing.T, b locking.Backend) {
	ctx := t.Context()
	const ttl = 10 * time.Second
	key := "customer:4711:secret-\u00c5\u00c4\u00d6"
	before := time.Now()
	r := MustAcquire(t, b, key, ttl)
	after := time.Now()
	byKey, err := b.LookupKey(ctx, key)
	if err != nil || byKey == nil {
		t.Fatalf("LookupKey = %+v, %v", byKey, err)
	}
	byID, err := b.LookupLockID(ctx, r.LockID)
	if err != nil || byID == nil {
		t.Fatalf("LookupLockID = %+v, %v", byID, err)
	}
	if !equalInfo(*byKey, *byID) {
		t.Errorf("lookup by key %+v differs from lookup by lockId %+v", *byKey, *byID)
	}
	info := *byKey
	if info.KeyHash != locking.HashKey(key) || !hashForm.MatchString(info.KeyHash) {
		t.Errorf("KeyHash %q; want locking.HashKey(key) = %q", info.KeyHash, locking.HashKey(key))
	}
	if info.LockIDHash != locking.HashKey(r.LockID) || !hashForm.MatchString(info.LockIDHash) {
		t.Errorf("LockIDHash %q; want locking.HashKey(lockId) = %q", info.LockIDHash, locking.HashKey(r.LockID))
	}
	if info.Fence != r.Fence {
		t.Errorf("Fence %q; want the acquire's %q", info.Fence, r.Fence)
	}
	if info.ExpiresAt.UnixMilli() != r.ExpiresAt.UnixMilli() {
		t.Errorf("ExpiresAt %v; want the acquire's %v", info.ExpiresAt, r.ExpiresAt)
	}
	slack := clockSlack(b)
	if !Within(info.AcquiredAt, before, after, slack) {
		t.Errorf("AcquiredAt %v; want the acquisition time, in [%v, %v]", info.AcquiredAt, before, after)
	}
	if d := info.ExpiresAt.Sub(info.AcquiredAt); d < ttl-slack || d > ttl+slack {
		t.Errorf("ExpiresAt - AcquiredAt = %s; want the ttl %s", d, ttl)
	}
	// No raw key or lockId anywhere in the value or its renderings.
	secrets := []string{key, r.LockID}
	v := reflect.ValueOf(info)
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.String {
			for _, s := range secrets {
				if strings.Contains(f.String(), s) {
					t.Errorf("LockInfo.%s holds a raw key or lockId", v.Type().Field(i).Name)
				}
			}
		}
	}
	data, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{string(data), fmt.Sprintf("%+v", info), fmt.Sprintf("%#v", info)} {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("a rendering of LockInfo contains a raw key or lockId: %s", text)
			}
		}
	}
}

// equalInfo reports whether a and b describe the same lock state (times
// compared as instants).
func equalInfo(a, b locking.LockInfo) bool {
	return a.KeyHash == b.KeyHash && a.LockIDHash == b.LockIDHash && a.Fence == b.Fence &&
		a.ExpiresAt.Equal(b.ExpiresAt) && a.AcquiredAt.Equal(b.AcquiredAt)
}
