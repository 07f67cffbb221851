package locking

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// reasonFake is the fake reporting why release and extend fail.
type reasonFake struct{ *fake }

func (f reasonFake) ReleaseWithReason(ctx context.Context, lockID string) (bool, Reason, error) {
	ok, err := f.Release(ctx, lockID)
	if !ok && err == nil {
		return false, ReasonNotFound, nil
	}
	return ok, "", err
}

func (f reasonFake) ExtendWithReason(ctx context.Context, lockID string, ttl time.Duration) (ExtendResult, Reason, error) {
	r, err := f.Extend(ctx, lockID, ttl)
	if !r.OK && err == nil {
		return r, ReasonExpired, nil
	}
	return r, "", err
}

// recorder collects events, delivered on the decorator's goroutine.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func newRecorder() *recorder { return &recorder{} }

func (r *recorder) on(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// count is how many events have been delivered.
func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// wait returns the first n events, once the decorator has delivered what
// it has queued. It must run in a synctest bubble: synctest.Wait returns
// when the delivery goroutine is idle (gone) or blocked in the callback.
func (r *recorder) wait(t *testing.T, n int) []Event {
	t.Helper()
	synctest.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) < n {
		t.Fatalf("%d events delivered; want %d", len(r.events), n)
	}
	return append([]Event(nil), r.events[:n]...)
}

func TestTelemetryEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		for _, raw := range []bool{false, true} {
			rec := newRecorder()
			f := newFake()
			b := WithTelemetry(reasonFake{f}, rec.on, raw)
			r, err := b.Acquire(ctx, "k", time.Minute)
			if err != nil || !r.OK {
				t.Fatal(r, err)
			}
			_, _ = b.Acquire(ctx, "k", time.Minute)
			_, _ = b.IsLocked(ctx, "k")
			_, _ = b.LookupKey(ctx, "k")
			_, _ = b.LookupLockID(ctx, r.LockID)
			_, _ = b.Extend(ctx, r.LockID, time.Minute)
			_, _ = b.Release(ctx, r.LockID)
			_, _ = b.Release(ctx, r.LockID)
			_, _ = b.Extend(ctx, r.LockID, time.Minute)
			_, _ = b.IsLocked(ctx, "k")
			_, _ = b.LookupKey(ctx, "k")
			f.set(func(f *fake) { f.acquireErr = &Error{Code: ServiceUnavailable, Op: "acquire"} })
			_, acqErr := b.Acquire(ctx, "k", time.Minute)

			kh, lh := HashKey("k"), HashKey(r.LockID)
			want := []Event{
				{Type: EventAcquire, KeyHash: kh, LockIDHash: lh, Result: ResultOK},
				{Type: EventAcquire, KeyHash: kh, Result: ResultFail, Reason: ReasonLocked},
				{Type: EventIsLocked, KeyHash: kh, Result: ResultOK},
				{Type: EventLookup, KeyHash: kh, LockIDHash: lh, Result: ResultOK},
				{Type: EventLookup, KeyHash: kh, LockIDHash: lh, Result: ResultOK},
				{Type: EventExtend, LockIDHash: lh, Result: ResultOK},
				{Type: EventRelease, LockIDHash: lh, Result: ResultOK},
				{Type: EventRelease, LockIDHash: lh, Result: ResultFail, Reason: ReasonNotFound},
				{Type: EventExtend, LockIDHash: lh, Result: ResultFail, Reason: ReasonExpired},
				{Type: EventIsLocked, KeyHash: kh, Result: ResultFail},
				{Type: EventLookup, KeyHash: kh, Result: ResultFail},
				{Type: EventAcquire, KeyHash: kh, Result: ResultFail, Err: acqErr},
			}
			if raw {
				rawKey := []bool{true, true, true, true, false, false, false, false, false, true, true, true}
				rawID := []bool{true, false, false, false, true, true, true, true, true, false, false, false}
				for i := range want {
					if rawKey[i] {
						want[i].Key = "k"
					}
					if rawID[i] {
						want[i].LockID = r.LockID
					}
				}
			}
			got := rec.wait(t, len(want))
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("raw %v, event %d = %+v\nwant %+v", raw, i, got[i], want[i])
				}
				if !raw && (got[i].Key != "" || got[i].LockID != "") {
					t.Errorf("raw values without includeRaw: %+v", got[i])
				}
			}
		}
	})
}

// Without a ReasonReporter a failed release has no reason: the decorator
// does not guess.
func TestTelemetryNoReasonWithoutReporter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		b := WithTelemetry(newFake(), rec.on, false)
		id := fakeLockID(0) // never issued: the fake counts from 1
		if ok, err := b.Release(context.Background(), id); ok || err != nil {
			t.Fatal(ok, err)
		}
		if e := rec.wait(t, 1)[0]; e.Result != ResultFail || e.Reason != "" {
			t.Errorf("event %+v", e)
		}
	})
}

// stalled decorates a fake with a recorder whose callback blocks on the
// first event until unblock is closed: one that falls behind.
func stalled(includeRaw bool) (b Backend, rec *recorder, unblock chan struct{}) {
	rec, unblock = newRecorder(), make(chan struct{})
	var once sync.Once
	b = WithTelemetry(newFake(), func(e Event) {
		once.Do(func() { <-unblock })
		rec.on(e)
	}, includeRaw)
	return b, rec, unblock
}

// onEvent is never awaited: a callback that blocks does not delay
// operations, and its events arrive, in order, once it unblocks.
func TestTelemetryNeverAwaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, rec, unblock := stalled(true)
		keys := []string{"a", "b", "c", "d", "e"}
		// Were an operation to wait for the blocked callback, nothing in
		// the bubble could move, and synctest would report the deadlock.
		for _, k := range keys {
			_, _ = b.IsLocked(context.Background(), k)
		}
		if got := rec.wait(t, 0); len(got) != 0 {
			t.Fatalf("%d events delivered past the blocked callback", len(got))
		}
		close(unblock)
		for i, e := range rec.wait(t, len(keys)) {
			if e.Key != keys[i] {
				t.Errorf("event %d for %q, want %q (order)", i, e.Key, keys[i])
			}
		}
	})
}

// A panicking callback is isolated: the operation is unaffected and later
// events are still delivered.
func TestTelemetryCallbackPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		n := 0
		b := WithTelemetry(newFake(), func(e Event) {
			n++ // only the delivery goroutine touches n
			if n == 1 {
				panic("telemetry bug")
			}
			rec.on(e)
		}, false)
		r, err := b.Acquire(context.Background(), "k", time.Minute)
		if err != nil || !r.OK {
			t.Fatal(r, err)
		}
		if locked, err := b.IsLocked(context.Background(), "k"); !locked || err != nil {
			t.Fatal(locked, err)
		}
		if e := rec.wait(t, 1)[0]; e.Type != EventIsLocked {
			t.Errorf("event after the panic %+v", e)
		}
	})
}

// A callback that falls behind loses the events beyond the queue, counted
// in the next delivered event's Dropped; operations never block on it.
func TestTelemetryDropsWhenBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, rec, unblock := stalled(false)
		isLocked := func(n int) {
			for range n {
				_, _ = b.IsLocked(context.Background(), "k")
			}
		}
		isLocked(1)
		synctest.Wait() // the first event is out of the queue, its callback blocked
		isLocked(telemetryQueue + 500)
		close(unblock)
		got := rec.wait(t, 1+telemetryQueue)
		if n := rec.count(); n != 1+telemetryQueue {
			t.Errorf("%d events delivered; want the blocked one and a full queue, %d", n, 1+telemetryQueue)
		}
		// The first event taken after the drops carries their count.
		for i, e := range got {
			want := uint64(0)
			if i == 1 {
				want = 500
			}
			if e.Dropped != want {
				t.Errorf("event %d: Dropped %d; want %d", i, e.Dropped, want)
			}
		}
		isLocked(1)
		if e := rec.wait(t, telemetryQueue+2)[telemetryQueue+1]; e.Dropped != 0 {
			t.Errorf("event after the backlog: Dropped %d; want 0", e.Dropped)
		}
	})
}

// The delivery goroutine exits once the queue is empty, so a decorator
// holds no goroutine while idle.
func TestTelemetryGoroutineExitsWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		b := WithTelemetry(newFake(), rec.on, false).(*telemetryBackend)
		running := func() bool {
			b.em.mu.Lock()
			defer b.em.mu.Unlock()
			return b.em.running
		}
		_, _ = b.IsLocked(context.Background(), "k")
		rec.wait(t, 1)
		if running() {
			t.Fatal("delivery goroutine still running when idle")
		}
		// And it starts again for the next event.
		_, _ = b.IsLocked(context.Background(), "k")
		rec.wait(t, 2)
		if running() {
			t.Fatal("delivery goroutine still running when idle")
		}
	})
}

func TestTelemetryWrapping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		if b := WithTelemetry(f, nil, false); b != Backend(f) {
			t.Error("nil onEvent should return the backend itself")
		}
		if _, ok := WithTelemetry(f, func(Event) {}, false).(DebugLookuper); ok {
			t.Error("decorator claims raw lookups its backend lacks")
		}
		if _, ok := WithTelemetry(debugFake{f}, func(Event) {}, false).(KeyedBackend); ok {
			t.Error("decorator claims a keyed shortcut its backend lacks")
		}
		rec := newRecorder()
		b := WithTelemetry(debugFake{f}, rec.on, false)
		if _, ok := b.(DebugLookuper); !ok {
			t.Fatal("decorator hides the backend's DebugLookuper")
		}
		if b.Capabilities() != f.Capabilities() {
			t.Error("capabilities differ")
		}
		r, _ := b.Acquire(context.Background(), "k", time.Minute)
		got, err := GetByIDRaw(context.Background(), b, r.LockID)
		if err != nil || got == nil || got.Key != "k" || got.LockID != r.LockID {
			t.Fatalf("GetByIDRaw through the decorator = %+v, %v", got, err)
		}
		e := rec.wait(t, 2)[1]
		if e.Type != EventLookup || e.Result != ResultOK || e.LockID != "" || e.KeyHash != HashKey("k") {
			t.Errorf("raw lookup event %+v", e)
		}
		// Events never carry raw values in error text either: the backend's
		// errors are hashed, and the decorator adds none.
		f.set(func(f *fake) { f.acquireErr = &Error{Code: Internal, Op: "acquire", KeyHash: HashKey("secret-key")} })
		_, _ = b.Acquire(context.Background(), "secret-key", time.Minute)
		e = rec.wait(t, 3)[2]
		if e.Err == nil || strings.Contains(e.Err.Error(), "secret-key") || !errors.Is(e.Err, ErrInternal) {
			t.Errorf("error event %+v", e)
		}
	})
}

// keyedFake is the fake with the keyed shortcut (KeyedBackend), its calls
// counted apart from Release's and Extend's.
type keyedFake struct{ *fake }

func (f keyedFake) ReleaseKey(_ context.Context, key, lockID string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["releaseKey"]++
	if l, ok := f.locks[key]; ok && l.id == lockID && IsLive(l.expires.UnixMilli(), f.now().UnixMilli()) {
		delete(f.locks, key)
		return true, nil
	}
	return false, nil
}

func (f keyedFake) ExtendKey(_ context.Context, key, lockID string, ttl time.Duration) (ExtendResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["extendKey"]++
	if l, ok := f.locks[key]; ok && l.id == lockID && IsLive(l.expires.UnixMilli(), f.now().UnixMilli()) {
		exp := f.now().Add(ttl)
		f.locks[key] = fakeLock{id: lockID, expires: exp}
		return ExtendResult{OK: true, ExpiresAt: exp}, nil
	}
	return ExtendResult{}, nil
}

// debugKeyedFake has both the raw lookups and the keyed shortcut.
type debugKeyedFake struct{ keyedFake }

func (f debugKeyedFake) LookupKeyDebug(ctx context.Context, key string) (*LockInfoDebug, error) {
	return debugFake{f.fake}.LookupKeyDebug(ctx, key)
}

func (f debugKeyedFake) LookupLockIDDebug(ctx context.Context, lockID string) (*LockInfoDebug, error) {
	return debugFake{f.fake}.LookupLockIDDebug(ctx, lockID)
}

var (
	_ KeyedBackend  = keyedFake{}
	_ KeyedBackend  = debugKeyedFake{}
	_ DebugLookuper = debugKeyedFake{}
)

// A Lease on a decorated keyed backend still extends and releases by key
// (the decorator does not hide KeyedBackend), and those calls are reported.
func TestTelemetryKeepsKeyedShortcut(t *testing.T) {
	for _, c := range []struct {
		name  string
		wrap  func(*fake) Backend
		debug bool
	}{
		{"keyed", func(f *fake) Backend { return keyedFake{f} }, false},
		{"keyed and debug", func(f *fake) Backend { return debugKeyedFake{keyedFake{f}} }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake()
				rec := newRecorder()
				b := WithTelemetry(c.wrap(f), rec.on, false)
				if _, ok := b.(KeyedBackend); !ok {
					t.Fatal("the decorator hides the backend's KeyedBackend")
				}
				if _, ok := b.(DebugLookuper); ok != c.debug {
					t.Errorf("decorator is a DebugLookuper: %v; want %v", ok, c.debug)
				}
				if _, ok := b.(ReasonReporter); !ok {
					t.Error("decorator is not a ReasonReporter")
				}
				l, err := Acquire(context.Background(), b, "k", WithTTL(300*time.Millisecond))
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(100 * time.Millisecond) // one heartbeat
				synctest.Wait()
				if err := l.Release(context.Background()); err != nil {
					t.Fatal(err)
				}
				if k, r := f.count("extendKey"), f.count("releaseKey"); k != 1 || r != 1 || f.count("extend") != 0 || f.count("release") != 0 {
					t.Errorf("extendKey %d, releaseKey %d, extend %d, release %d; want the lease to use only the keyed calls, once each",
						k, r, f.count("extend"), f.count("release"))
				}
				kh, lh := HashKey("k"), HashKey(l.LockID())
				want := []Event{
					{Type: EventAcquire, KeyHash: kh, LockIDHash: lh, Result: ResultOK},
					{Type: EventExtend, KeyHash: kh, LockIDHash: lh, Result: ResultOK},
					{Type: EventRelease, KeyHash: kh, LockIDHash: lh, Result: ResultOK},
				}
				got := rec.wait(t, len(want))
				for i := range want {
					if got[i] != want[i] {
						t.Errorf("event %d = %+v\nwant %+v", i, got[i], want[i])
					}
				}
				// A keyed call that changes nothing is a failure event.
				if ok, err := b.(KeyedBackend).ReleaseKey(context.Background(), "k", l.LockID()); ok || err != nil {
					t.Fatal(ok, err)
				}
				if e := rec.wait(t, len(want)+1)[len(want)]; e.Type != EventRelease || e.Result != ResultFail || e.KeyHash != kh {
					t.Errorf("refused keyed release: event %+v", e)
				}
			})
		})
	}
}
