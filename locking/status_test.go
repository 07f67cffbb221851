package locking

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"testing"
	"time"
)

// statusTime is how Status shows a time: UTC, to the millisecond.
var statusTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func TestGetStatus(t *testing.T) {
	ctx := context.Background()
	f := newFake()

	free, err := GetStatus(ctx, f, "k")
	if err != nil || free != (Status{KeyHash: HashKey("k")}) || free.Remaining() != 0 {
		t.Errorf("GetStatus of a free key = %+v, %v", free, err)
	}
	if b, _ := json.Marshal(free); string(b) != `{"locked":false,"keyHash":"`+HashKey("k")+`"}` {
		t.Errorf("JSON of a free key = %s", b)
	}
	// The hash is the normalised key's: NFD and NFC name one lock.
	if s, err := GetStatus(ctx, f, "caf\u0065\u0301"); err != nil || s.KeyHash != HashKey("caf\u00e9") {
		t.Errorf("GetStatus of an NFD key = %+v, %v", s, err)
	}

	r, _ := f.Acquire(ctx, "k", time.Minute)
	s, err := GetStatus(ctx, f, "k")
	if err != nil || !s.Locked || s.KeyHash != HashKey("k") || s.LockIDHash != HashKey(r.LockID) {
		t.Fatalf("GetStatus of a held key = %+v, %v", s, err)
	}
	if s.AcquiredAt == nil || s.ExpiresAt == nil || !statusTime.MatchString(*s.ExpiresAt) || !statusTime.MatchString(*s.AcquiredAt) {
		t.Errorf("times %v, %v: want UTC to the millisecond", s.AcquiredAt, s.ExpiresAt)
	}
	if exp, err := time.Parse(time.RFC3339Nano, *s.ExpiresAt); err != nil || !exp.Equal(r.ExpiresAt.Truncate(time.Millisecond)) {
		t.Errorf("expiresAt %s, want %s", *s.ExpiresAt, r.ExpiresAt)
	}
	if s.RemainingMs == nil || *s.RemainingMs <= 0 || *s.RemainingMs > 60_000 || s.Remaining() != time.Duration(*s.RemainingMs)*time.Millisecond {
		t.Errorf("remaining %v (%v)", s.RemainingMs, s.Remaining())
	}
	if s.Key != "" || s.LockID != "" {
		t.Errorf("raw values without GetStatusRaw: %+v", s)
	}
	var fields map[string]any
	if b, _ := json.Marshal(s); json.Unmarshal(b, &fields) != nil || len(fields) != 6 || fields["lockIdHash"] != s.LockIDHash {
		t.Errorf("JSON of a held key = %s, want locked, keyHash, lockIdHash, acquiredAt, expiresAt and remainingMs", b)
	}

	// An expired lock, past the tolerance, is no lock; its remaining time
	// is never negative meanwhile.
	f.set(func(f *fake) { f.locks["k"] = fakeLock{id: r.LockID, expires: time.Now().Add(-TimeTolerance / 2)} })
	if s, err := GetStatus(ctx, f, "k"); err != nil || !s.Locked || *s.RemainingMs != 0 {
		t.Errorf("GetStatus within the tolerance = %+v, %v", s, err)
	}
	f.set(func(f *fake) { f.locks["k"] = fakeLock{id: r.LockID, expires: time.Now().Add(-2 * TimeTolerance)} })
	if s, err := GetStatus(ctx, f, "k"); err != nil || s.Locked {
		t.Errorf("GetStatus of an expired lock = %+v, %v", s, err)
	}

	if _, err := GetStatus(ctx, f, "a/b"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("GetStatus of an invalid key = %v", err)
	}
	if _, err := GetStatus(ctx, errKeyLookups{f}, "k"); !errors.Is(err, ErrServiceUnavailable) {
		t.Errorf("GetStatus on a failing backend = %v", err)
	}
}

func TestGetStatusRaw(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	if _, err := GetStatusRaw(ctx, f, "k"); !errors.Is(err, ErrDebugUnsupported) {
		t.Errorf("GetStatusRaw without raw lookups = %v", err)
	}
	d := debugFake{f}
	if s, err := GetStatusRaw(ctx, d, "k"); err != nil || s.Locked || s.Key != "" || s.LockID != "" {
		t.Errorf("GetStatusRaw of a free key = %+v, %v", s, err)
	}
	r, _ := f.Acquire(ctx, "k", time.Minute)
	s, err := GetStatusRaw(ctx, d, "k")
	if err != nil || !s.Locked || s.Key != "k" || s.LockID != r.LockID || s.LockIDHash != HashKey(r.LockID) {
		t.Errorf("GetStatusRaw of a held key = %+v, %v", s, err)
	}
}

// errKeyLookups fails every lookup by key.
type errKeyLookups struct{ *fake }

func (errKeyLookups) LookupKey(context.Context, string) (*LockInfo, error) {
	return nil, &Error{Code: ServiceUnavailable, Op: "lookup"}
}

// reasons is the fake with ReasonReporter, giving reason for every
// release that fails.
type reasons struct {
	*fake
	reason Reason
}

func (r reasons) ReleaseWithReason(ctx context.Context, lockID string) (bool, Reason, error) {
	ok, err := r.Release(ctx, lockID)
	if ok || err != nil {
		return ok, "", err
	}
	return false, r.reason, nil
}

func (r reasons) ExtendWithReason(ctx context.Context, lockID string, ttl time.Duration) (ExtendResult, Reason, error) {
	res, err := r.Extend(ctx, lockID, ttl)
	return res, "", err
}

func TestForceRelease(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	r, _ := f.Acquire(ctx, "k", time.Minute)
	idHash := HashKey(r.LockID)

	got, err := ForceRelease(ctx, f, r.LockID)
	if want := (ReleaseResult{Released: true, LockIDHash: idHash, KeyHash: HashKey("k")}); err != nil || got != want {
		t.Errorf("ForceRelease = %+v, %v; want %+v", got, err, want)
	}
	if info, _ := GetByKey(ctx, f, "k"); info != nil {
		t.Errorf("lock still held: %+v", info)
	}

	// Nothing to release: the result says why, with ErrNotReleased.
	for _, tc := range []struct {
		b    Backend
		want Reason
	}{{f, ReasonNotHeld}, {reasons{f, ReasonExpired}, ReasonExpired}, {reasons{f, ReasonNotFound}, ReasonNotFound}} {
		got, err := ForceRelease(ctx, tc.b, r.LockID)
		if want := (ReleaseResult{LockIDHash: idHash, Reason: tc.want}); !errors.Is(err, ErrNotReleased) || got != want {
			t.Errorf("ForceRelease of a free lockId = %+v, %v; want %+v", got, err, want)
		}
	}
	if b, _ := json.Marshal(ReleaseResult{LockIDHash: "h", Reason: ReasonExpired}); string(b) != `{"released":false,"lockIdHash":"h","reason":"expired"}` {
		t.Errorf("JSON = %s", b)
	}

	// Failures are the backend's, not "not released".
	r, _ = f.Acquire(ctx, "k", time.Minute)
	if _, err := ForceRelease(ctx, errLookups{f}, r.LockID); !errors.Is(err, ErrServiceUnavailable) || errors.Is(err, ErrNotReleased) {
		t.Errorf("ForceRelease with a failing lookup = %v", err)
	}
	f.set(func(f *fake) { f.releaseErr = &Error{Code: ServiceUnavailable, Op: "release"} })
	if _, err := ForceRelease(ctx, f, r.LockID); !errors.Is(err, ErrServiceUnavailable) || errors.Is(err, ErrNotReleased) {
		t.Errorf("ForceRelease with a failing release = %v", err)
	}
}
