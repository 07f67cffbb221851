package locking

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// fake is an in-memory Backend with the contract's semantics (IsLive,
// per-key fences, no resurrection) and hooks to inject failures.
type fake struct {
	mu     sync.Mutex
	locks  map[string]fakeLock // key → holder
	fences map[string]uint64
	calls  map[string]int
	issued int // lockIds handed out

	skew       time.Duration // the backend's clock minus ours, as a server's may be
	serverTime bool          // Capabilities: the server's clock decides (set with skew)
	acquireErr error
	// acquireHook, when set, runs first in every Acquire; an error it
	// returns is the call's.
	acquireHook func(ctx context.Context) error
	releaseErr  error
	extendHook  func(ctx context.Context) (ExtendResult, error) // replaces Extend when set
}

// fakeLockID is the nth lockId the fake hands out: of the contract's form
// (22 base64url characters), and distinct per n.
func fakeLockID(n int) string { return fmt.Sprintf("fakelock%014d", n) }

type fakeLock struct {
	id      string
	expires time.Time
}

func newFake() *fake {
	return &fake{locks: map[string]fakeLock{}, fences: map[string]uint64{}, calls: map[string]int{}}
}

// now is the backend's clock: ours plus skew. Callers hold f.mu.
func (f *fake) now() time.Time { return time.Now().Add(f.skew) }

func (f *fake) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *fake) set(fn func(f *fake)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fake) Acquire(ctx context.Context, key string, ttl time.Duration) (AcquireResult, error) {
	f.mu.Lock()
	f.calls["acquire"]++
	hook := f.acquireHook
	f.mu.Unlock()
	if hook != nil {
		if err := hook(ctx); err != nil {
			return AcquireResult{}, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.acquireErr != nil {
		return AcquireResult{}, f.acquireErr
	}
	if err := ctx.Err(); err != nil {
		return AcquireResult{}, &Error{Code: Aborted, Op: "acquire", Err: err}
	}
	now := f.now()
	if l, ok := f.locks[key]; ok && IsLive(l.expires.UnixMilli(), now.UnixMilli()) {
		return AcquireResult{}, nil
	}
	f.issued++
	id := fakeLockID(f.issued)
	f.fences[key]++
	fence := fmt.Sprintf("%015d", f.fences[key])
	f.locks[key] = fakeLock{id: id, expires: now.Add(ttl)}
	return AcquireResult{OK: true, LockID: id, ExpiresAt: now.Add(ttl), Fence: fence}, nil
}

func (f *fake) find(id string) (string, bool) {
	for k, l := range f.locks {
		if l.id == id && IsLive(l.expires.UnixMilli(), f.now().UnixMilli()) {
			return k, true
		}
	}
	return "", false
}

func (f *fake) Release(_ context.Context, lockID string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["release"]++
	if f.releaseErr != nil {
		return false, f.releaseErr
	}
	k, ok := f.find(lockID)
	if ok {
		delete(f.locks, k)
	}
	return ok, nil
}

func (f *fake) Extend(ctx context.Context, lockID string, ttl time.Duration) (ExtendResult, error) {
	f.mu.Lock()
	f.calls["extend"]++
	hook := f.extendHook
	f.mu.Unlock()
	if hook != nil {
		return hook(ctx)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k, ok := f.find(lockID)
	if !ok {
		return ExtendResult{}, nil
	}
	exp := f.now().Add(ttl)
	f.locks[k] = fakeLock{id: lockID, expires: exp}
	return ExtendResult{OK: true, ExpiresAt: exp}, nil
}

func (f *fake) IsLocked(ctx context.Context, key string) (bool, error) {
	info, err := f.LookupKey(ctx, key)
	return info != nil, err
}

func (f *fake) LookupKey(_ context.Context, key string) (*LockInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.locks[key]; ok && IsLive(l.expires.UnixMilli(), f.now().UnixMilli()) {
		return &LockInfo{KeyHash: HashKey(key), LockIDHash: HashKey(l.id), ExpiresAt: l.expires}, nil
	}
	return nil, nil
}

func (f *fake) LookupLockID(_ context.Context, lockID string) (*LockInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if k, ok := f.find(lockID); ok {
		return &LockInfo{KeyHash: HashKey(k), LockIDHash: HashKey(lockID), ExpiresAt: f.locks[k].expires}, nil
	}
	return nil, nil
}

func (f *fake) Capabilities() Capabilities {
	if f.serverTime {
		return Capabilities{Backend: "fake", SupportsFencing: true, TimeAuthority: "server"}
	}
	return Capabilities{Backend: "fake", SupportsFencing: true, TimeAuthority: "client"}
}

var _ Backend = (*fake)(nil)

func mustAcquire(t *testing.T, f Backend, key string, opts ...AcquireOption) *Lease {
	t.Helper()
	l, err := Acquire(context.Background(), f, key, opts...)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
