package locking

import (
	"context"
	"errors"
	"testing"
	"time"
)

// debugFake is the fake with raw lookups (DebugLookuper).
type debugFake struct{ *fake }

func (f debugFake) LookupKeyDebug(ctx context.Context, key string) (*LockInfoDebug, error) {
	info, err := f.LookupKey(ctx, key)
	if info == nil || err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return &LockInfoDebug{LockInfo: *info, Key: key, LockID: f.locks[key].id}, nil
}

func (f debugFake) LookupLockIDDebug(ctx context.Context, lockID string) (*LockInfoDebug, error) {
	info, err := f.LookupLockID(ctx, lockID)
	if info == nil || err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k, _ := f.find(lockID)
	return &LockInfoDebug{LockInfo: *info, Key: k, LockID: lockID}, nil
}

var _ DebugLookuper = debugFake{}

func TestOwnsAndGetBy(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	r, err := f.Acquire(ctx, "k", time.Minute)
	if err != nil || !r.OK {
		t.Fatal(r, err)
	}
	if owned, err := Owns(ctx, f, r.LockID); !owned || err != nil {
		t.Errorf("Owns = %v, %v", owned, err)
	}
	byKey, err := GetByKey(ctx, f, "k")
	if err != nil || byKey == nil || byKey.KeyHash != HashKey("k") || byKey.LockIDHash != HashKey(r.LockID) {
		t.Errorf("GetByKey = %+v, %v", byKey, err)
	}
	byID, err := GetByID(ctx, f, r.LockID)
	if err != nil || byID == nil || *byID != *byKey {
		t.Errorf("GetByID = %+v, %v; want %+v", byID, err, byKey)
	}
	other := fakeLockID(0) // never issued: the fake counts from 1
	if owned, err := Owns(ctx, f, other); owned || err != nil {
		t.Errorf("Owns(other) = %v, %v", owned, err)
	}
	if ok, _ := f.Release(ctx, r.LockID); !ok {
		t.Fatal("release")
	}
	if owned, err := Owns(ctx, f, r.LockID); owned || err != nil {
		t.Errorf("Owns after release = %v, %v", owned, err)
	}
	if info, err := GetByKey(ctx, f, "k"); info != nil || err != nil {
		t.Errorf("GetByKey after release = %+v, %v", info, err)
	}

	// Owns passes errors through rather than reporting "not owned".
	if _, err := Owns(ctx, errLookups{f}, r.LockID); !errors.Is(err, ErrServiceUnavailable) {
		t.Errorf("Owns on a failing backend = %v", err)
	}
}

// errLookups fails every lookup.
type errLookups struct{ *fake }

func (errLookups) LookupLockID(context.Context, string) (*LockInfo, error) {
	return nil, &Error{Code: ServiceUnavailable, Op: "lookup"}
}

func TestRawLookups(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	r, _ := f.Acquire(ctx, "k", time.Minute)

	// A backend without DebugLookuper: a clear, matchable error.
	for name, err := range map[string]error{
		"GetByKeyRaw": func() error { _, err := GetByKeyRaw(ctx, f, "k"); return err }(),
		"GetByIDRaw":  func() error { _, err := GetByIDRaw(ctx, f, r.LockID); return err }(),
		"LookupDebug": func() error { _, err := LookupDebug(ctx, f, LookupQuery{Key: "k"}); return err }(),
	} {
		if !errors.Is(err, ErrDebugUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s on a backend without raw lookups = %v", name, err)
		}
	}

	d := debugFake{f}
	byKey, err := GetByKeyRaw(ctx, d, "k")
	if err != nil || byKey == nil || byKey.Key != "k" || byKey.LockID != r.LockID || byKey.KeyHash != HashKey("k") {
		t.Errorf("GetByKeyRaw = %+v, %v", byKey, err)
	}
	byID, err := GetByIDRaw(ctx, d, r.LockID)
	if err != nil || byID == nil || *byID != *byKey {
		t.Errorf("GetByIDRaw = %+v, %v", byID, err)
	}
	for _, q := range []LookupQuery{{Key: "k"}, {LockID: r.LockID}} {
		if got, err := LookupDebug(ctx, d, q); err != nil || got == nil || *got != *byKey {
			t.Errorf("LookupDebug(%+v) = %+v, %v", q, got, err)
		}
	}
	for _, q := range []LookupQuery{{}, {Key: "k", LockID: r.LockID}} {
		if _, err := LookupDebug(ctx, d, q); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("LookupDebug with a bad query = %v", err)
		}
	}
	_, _ = f.Release(ctx, r.LockID)
	if got, err := GetByIDRaw(ctx, d, r.LockID); got != nil || err != nil {
		t.Errorf("GetByIDRaw after release = %+v, %v", got, err)
	}
}
