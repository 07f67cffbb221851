package locking

import (
	"context"
	"sync"
	"time"
)

// Reason says why an operation reported false, when the backend knows it
// without extra I/O. The empty Reason means unknown.
type Reason string

// The reasons an operation changed nothing, as SyncGuard's telemetry
// names them.
const (
	ReasonExpired  Reason = "expired"   // the lock was there but no longer live
	ReasonNotFound Reason = "not-found" // no lock carries the lockId
	ReasonLocked   Reason = "locked"    // acquire: another live lock holds the key
)

// ReasonReporter is implemented by backends that can say why a release or
// extend changed nothing, when they can tell from what they read anyway:
// they MUST NOT do extra I/O to find out. WithTelemetry uses it to fill
// Event.Reason. The results and errors are those of Release and Extend;
// the reason is empty on success and when unknown.
type ReasonReporter interface {
	// ReleaseWithReason is Release, with the reason for a false result.
	ReleaseWithReason(ctx context.Context, lockID string) (bool, Reason, error)
	// ExtendWithReason is Extend, with the reason for a result that is not OK.
	ExtendWithReason(ctx context.Context, lockID string, ttl time.Duration) (ExtendResult, Reason, error)
}

// Event types, one per Backend operation.
const (
	EventAcquire  = "acquire"
	EventRelease  = "release"
	EventExtend   = "extend"
	EventIsLocked = "isLocked"
	EventLookup   = "lookup" // LookupKey, LookupLockID and their debug forms
)

// Event results.
const (
	ResultOK   = "ok"   // acquired, released, extended, locked, found
	ResultFail = "fail" // the opposite, or an error (then Err is set)
)

// Event describes one backend operation, as WithTelemetry reports it. Keys
// and lockIds appear as HashKey hashes; the raw values only when the
// decorator was built with includeRaw.
type Event struct {
	Type       string // EventAcquire, EventRelease, …
	KeyHash    string // HashKey of the key, when known
	LockIDHash string // HashKey of the lockId, when known
	Result     string // ResultOK or ResultFail
	// Reason says why a release or extend failed (ReasonExpired,
	// ReasonNotFound) when the backend knows it cheaply (ReasonReporter),
	// or is ReasonLocked for acquire contention; empty otherwise.
	Reason Reason
	Err    error // the operation's error, if it failed with one
	// Key and LockID are the raw values, set only with includeRaw. They
	// are for debugging only: never log them.
	Key    string
	LockID string
	// Dropped counts events discarded, because the callback fell behind,
	// since the previous delivered event.
	Dropped uint64
}

// telemetryQueue bounds the events waiting for the callback. Past it new
// events are dropped (and counted), never waited for.
const telemetryQueue = 1024

// WithTelemetry returns b decorated to report every operation to onEvent,
// for metrics and debugging. With a nil onEvent it returns b itself, so
// telemetry costs nothing unless asked for. includeRaw adds the raw key
// and lockId to events; leave it false outside debugging.
//
// onEvent is never awaited: operations queue their event and return. One
// goroutine per decorator, started when events are queued and exiting once
// the queue is empty (so an idle or discarded decorator holds none),
// delivers them in the order the operations completed, one at a time.
// Hashes are computed on that goroutine, not the caller's. If onEvent
// falls behind by more than 1024 events, new events are dropped and
// counted in the next delivered event's Dropped. A panic in onEvent is
// recovered and ignored; later events are still delivered.
//
// The decorator implements DebugLookuper and KeyedBackend exactly when b
// does, reporting their calls too (a keyed release or extend as an
// EventRelease or EventExtend naming the key), so that a Lease on the
// decorated backend keeps its keyed shortcut; and ReasonReporter always
// (passing on b's reasons, if it has them).
func WithTelemetry(b Backend, onEvent func(Event), includeRaw bool) Backend {
	if onEvent == nil {
		return b
	}
	t := &telemetryBackend{b: b, em: &emitter{onEvent: onEvent, includeRaw: includeRaw}}
	t.reasons, _ = b.(ReasonReporter)
	d, debug := b.(DebugLookuper)
	k, keyed := b.(KeyedBackend)
	switch {
	case debug && keyed:
		return &telemetryDebugKeyed{t, debugEvents{d, t.em}, keyedEvents{k, t.em}}
	case debug:
		return &telemetryDebug{t, debugEvents{d, t.em}}
	case keyed:
		return &telemetryKeyed{t, keyedEvents{k, t.em}}
	}
	return t
}

// pending is an event before delivery: raw values not yet hashed.
type pending struct {
	typ                 string
	key, lockID         string // raw; hashed on the delivery goroutine
	keyHash, lockIDHash string // known already (from a LockInfo)
	ok                  bool
	reason              Reason
	err                 error
}

// emitter queues events and delivers them on its own goroutine.
type emitter struct {
	onEvent    func(Event)
	includeRaw bool

	mu      sync.Mutex
	queue   []pending
	running bool   // a delivery goroutine is running
	dropped uint64 // since the last event taken for delivery
}

func (e *emitter) emit(p pending) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.queue) >= telemetryQueue {
		e.dropped++
		return
	}
	e.queue = append(e.queue, p)
	if !e.running {
		e.running = true
		go e.drain()
	}
}

func (e *emitter) drain() {
	for {
		e.mu.Lock()
		if len(e.queue) == 0 {
			e.running = false
			e.mu.Unlock()
			return
		}
		p := e.queue[0]
		e.queue[0] = pending{} // let the raw values go
		e.queue = e.queue[1:]
		dropped := e.dropped
		e.dropped = 0
		e.mu.Unlock()
		e.deliver(p, dropped)
	}
}

func (e *emitter) deliver(p pending, dropped uint64) {
	defer func() { _ = recover() }() // the callback's panic is not the lock's
	ev := Event{Type: p.typ, KeyHash: p.keyHash, LockIDHash: p.lockIDHash, Result: ResultFail,
		Reason: p.reason, Err: p.err, Dropped: dropped}
	if p.ok {
		ev.Result = ResultOK
	}
	if ev.KeyHash == "" && p.key != "" {
		ev.KeyHash = HashKey(p.key)
	}
	if ev.LockIDHash == "" && p.lockID != "" {
		ev.LockIDHash = HashKey(p.lockID)
	}
	if e.includeRaw {
		ev.Key, ev.LockID = p.key, p.lockID
	}
	e.onEvent(ev)
}

// telemetryBackend is WithTelemetry's decorator.
type telemetryBackend struct {
	b       Backend
	reasons ReasonReporter // b's, if it has them
	em      *emitter
}

var (
	_ Backend        = (*telemetryBackend)(nil)
	_ ReasonReporter = (*telemetryBackend)(nil)
	_ DebugLookuper  = (*telemetryDebug)(nil)
	_ KeyedBackend   = (*telemetryKeyed)(nil)
	_ DebugLookuper  = (*telemetryDebugKeyed)(nil)
	_ KeyedBackend   = (*telemetryDebugKeyed)(nil)
	_ ReasonReporter = (*telemetryDebugKeyed)(nil)
)

// Acquire reports an EventAcquire.
func (t *telemetryBackend) Acquire(ctx context.Context, key string, ttl time.Duration) (AcquireResult, error) {
	r, err := t.b.Acquire(ctx, key, ttl)
	p := pending{typ: EventAcquire, key: key, ok: err == nil && r.OK, err: err}
	if p.ok {
		p.lockID = r.LockID
	} else if err == nil {
		p.reason = ReasonLocked
	}
	t.em.emit(p)
	return r, err
}

// Release reports an EventRelease.
func (t *telemetryBackend) Release(ctx context.Context, lockID string) (bool, error) {
	ok, _, err := t.ReleaseWithReason(ctx, lockID)
	return ok, err
}

// ReleaseWithReason is Release, passing on the wrapped backend's reason.
func (t *telemetryBackend) ReleaseWithReason(ctx context.Context, lockID string) (bool, Reason, error) {
	var (
		ok     bool
		reason Reason
		err    error
	)
	if t.reasons != nil {
		ok, reason, err = t.reasons.ReleaseWithReason(ctx, lockID)
	} else {
		ok, err = t.b.Release(ctx, lockID)
	}
	if ok || err != nil {
		reason = ""
	}
	t.em.emit(pending{typ: EventRelease, lockID: lockID, ok: err == nil && ok, reason: reason, err: err})
	return ok, reason, err
}

// Extend reports an EventExtend.
func (t *telemetryBackend) Extend(ctx context.Context, lockID string, ttl time.Duration) (ExtendResult, error) {
	r, _, err := t.ExtendWithReason(ctx, lockID, ttl)
	return r, err
}

// ExtendWithReason is Extend, passing on the wrapped backend's reason.
func (t *telemetryBackend) ExtendWithReason(ctx context.Context, lockID string, ttl time.Duration) (ExtendResult, Reason, error) {
	var (
		r      ExtendResult
		reason Reason
		err    error
	)
	if t.reasons != nil {
		r, reason, err = t.reasons.ExtendWithReason(ctx, lockID, ttl)
	} else {
		r, err = t.b.Extend(ctx, lockID, ttl)
	}
	if r.OK || err != nil {
		reason = ""
	}
	t.em.emit(pending{typ: EventExtend, lockID: lockID, ok: err == nil && r.OK, reason: reason, err: err})
	return r, reason, err
}

// IsLocked reports an EventIsLocked, ResultOK when the key is locked.
func (t *telemetryBackend) IsLocked(ctx context.Context, key string) (bool, error) {
	locked, err := t.b.IsLocked(ctx, key)
	t.em.emit(pending{typ: EventIsLocked, key: key, ok: err == nil && locked, err: err})
	return locked, err
}

// LookupKey reports an EventLookup, ResultOK when a lock was found.
func (t *telemetryBackend) LookupKey(ctx context.Context, key string) (*LockInfo, error) {
	info, err := t.b.LookupKey(ctx, key)
	t.em.emit(lookupEvent(key, "", info, err))
	return info, err
}

// LookupLockID reports an EventLookup, ResultOK when a lock was found.
func (t *telemetryBackend) LookupLockID(ctx context.Context, lockID string) (*LockInfo, error) {
	info, err := t.b.LookupLockID(ctx, lockID)
	t.em.emit(lookupEvent("", lockID, info, err))
	return info, err
}

func lookupEvent(key, lockID string, info *LockInfo, err error) pending {
	p := pending{typ: EventLookup, key: key, lockID: lockID, ok: err == nil && info != nil, err: err}
	if info != nil {
		// The hashes of what was found, so a lookup by key names the
		// lockId and the other way round.
		p.keyHash, p.lockIDHash = info.KeyHash, info.LockIDHash
	}
	return p
}

// Capabilities are the wrapped backend's.
func (t *telemetryBackend) Capabilities() Capabilities { return t.b.Capabilities() }

// The decorators of backends with raw lookups, a keyed shortcut, or both:
// the core decorator plus the methods they add.
type (
	telemetryDebug struct {
		*telemetryBackend
		debugEvents
	}
	telemetryKeyed struct {
		*telemetryBackend
		keyedEvents
	}
	telemetryDebugKeyed struct {
		*telemetryBackend
		debugEvents
		keyedEvents
	}
)

// debugEvents reports a DebugLookuper's raw lookups.
type debugEvents struct {
	d  DebugLookuper
	em *emitter
}

// LookupKeyDebug reports an EventLookup, ResultOK when a lock was found.
func (t debugEvents) LookupKeyDebug(ctx context.Context, key string) (*LockInfoDebug, error) {
	info, err := t.d.LookupKeyDebug(ctx, key)
	t.em.emit(lookupEvent(key, "", debugInfo(info), err))
	return info, err
}

// LookupLockIDDebug reports an EventLookup, ResultOK when a lock was found.
func (t debugEvents) LookupLockIDDebug(ctx context.Context, lockID string) (*LockInfoDebug, error) {
	info, err := t.d.LookupLockIDDebug(ctx, lockID)
	t.em.emit(lookupEvent("", lockID, debugInfo(info), err))
	return info, err
}

// keyedEvents reports a KeyedBackend's keyed release and extend, as
// Release and Extend are reported, with the key too. The keyed calls have
// no reasons to pass on.
type keyedEvents struct {
	k  KeyedBackend
	em *emitter
}

// ReleaseKey reports an EventRelease.
func (t keyedEvents) ReleaseKey(ctx context.Context, key, lockID string) (bool, error) {
	ok, err := t.k.ReleaseKey(ctx, key, lockID)
	t.em.emit(pending{typ: EventRelease, key: key, lockID: lockID, ok: err == nil && ok, err: err})
	return ok, err
}

// ExtendKey reports an EventExtend.
func (t keyedEvents) ExtendKey(ctx context.Context, key, lockID string, ttl time.Duration) (ExtendResult, error) {
	r, err := t.k.ExtendKey(ctx, key, lockID, ttl)
	t.em.emit(pending{typ: EventExtend, key: key, lockID: lockID, ok: err == nil && r.OK, err: err})
	return r, err
}

func debugInfo(d *LockInfoDebug) *LockInfo {
	if d == nil {
		return nil
	}
	return &d.LockInfo
}
