package backendkit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/locking"
)

func testStorage() Storage {
	return Storage{
		MaxIDBytes: 40,
		CheckKey: func(nkey string) error {
			if strings.Contains(nkey, "!") {
				return errors.New("no bangs here")
			}
			return nil
		},
		Classify: func(context.Context, error) locking.Code { return locking.ServiceUnavailable },
	}
}

func TestStorageKeys(t *testing.T) {
	s := testStorage()
	k, err := s.Keys("isLocked", "cafe\u0301")
	want := Keys{Key: "caf\u00e9", KeyHash: locking.HashKey("caf\u00e9"), LockKey: "caf\u00e9", FenceKey: "fence:caf\u00e9"}
	if err != nil || k != want {
		t.Errorf("Keys = %+v, %v; want %+v", k, err, want)
	}
	// Over MaxIDBytes: both ids hashed, the fence id from the lock id.
	long := strings.Repeat("x", 41)
	k, err = s.Keys("isLocked", long)
	if err != nil || k.Key != long || k.LockKey != hashedID(long) || k.FenceKey != "fence:"+hashedID(long) {
		t.Errorf("Keys(long) = %+v, %v", k, err)
	}
	for _, c := range []struct{ name, key string }{{"invalid", "a/b"}, {"storage refuses", "a!b"}, {"empty", ""}} {
		_, err := s.Keys("isLocked", c.key)
		var le *locking.Error
		if !errors.Is(err, locking.ErrInvalidArgument) || !errors.As(err, &le) || le.Op != "isLocked" {
			t.Errorf("%s: Keys = %v; want InvalidArgument named isLocked", c.name, err)
		}
	}
	if _, err := s.Keys("isLocked", "a!b"); err == nil || !strings.Contains(err.Error(), "no bangs here") ||
		!strings.Contains(err.Error(), locking.HashKey("a!b")) {
		t.Errorf("CheckKey's refusal = %v; want its reason and the key's hash", err)
	}
}

func TestBeginAcquire(t *testing.T) {
	s := testStorage()
	ctx := context.Background()
	c, err := s.BeginAcquire(ctx, "k", time.Second)
	if err != nil || c.Key != "k" || c.LockKey != "k" || locking.ValidateLockID(c.LockID) != nil {
		t.Fatalf("BeginAcquire = %+v, %v", c, err)
	}
	e := c.Errors
	if e.Op != "acquire" || e.KeyHash != locking.HashKey("k") || e.LockIDHash != "" {
		t.Errorf("errors builder %+v", e)
	}
	// Its errors scrub the raw key, its ids and the new lockId.
	mapped := e.Map(ctx, errors.New(`no luck with "k" as `+c.LockID+" at fence:k"))
	if strings.Contains(mapped.Error(), c.LockID) || strings.Contains(mapped.Error(), `"k"`) || !errors.Is(mapped, locking.ErrServiceUnavailable) {
		t.Errorf("mapped %v", mapped)
	}
	if d, _ := s.BeginAcquire(ctx, "k", time.Second); d.LockID == c.LockID {
		t.Error("two acquires drew one lockId")
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(ctx, time.Unix(0, 0))
	defer cancel2()
	// Input is judged before the context: a bad key or TTL is the
	// caller's mistake whether or not the context has ended.
	for _, c := range []struct {
		name string
		ctx  context.Context
		key  string
		ttl  time.Duration
		want error
	}{
		{"bad key", cancelled, "a/b", time.Second, locking.ErrInvalidArgument},
		{"bad ttl", cancelled, "k", 0, locking.ErrInvalidArgument},
		{"sub-ms ttl", ctx, "k", 1500 * time.Microsecond, locking.ErrInvalidArgument},
		{"cancelled", cancelled, "k", time.Second, locking.ErrAborted},
		{"deadline", expired, "k", time.Second, locking.ErrNetworkTimeout},
	} {
		_, err := s.BeginAcquire(c.ctx, c.key, c.ttl)
		var le *locking.Error
		if !errors.Is(err, c.want) || !errors.As(err, &le) || le.Op != "acquire" {
			t.Errorf("%s: BeginAcquire = %v; want %v named acquire", c.name, err, c.want)
		}
	}
}

func TestBeginLockIDAndKey(t *testing.T) {
	s := testStorage()
	ctx := context.Background()
	id, _ := NewLockID()
	e, err := s.BeginLockID(ctx, "release", id)
	if err != nil || e.Op != "release" || e.LockIDHash != locking.HashKey(id) || e.KeyHash != "" {
		t.Fatalf("BeginLockID = %+v, %v", e, err)
	}
	if m := e.Map(ctx, errors.New("lost "+id)); strings.Contains(m.Error(), id) {
		t.Errorf("lockId not scrubbed: %v", m)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.BeginLockID(cancelled, "release", "short"); !errors.Is(err, locking.ErrInvalidArgument) {
		t.Errorf("malformed lockId: %v", err)
	}
	if _, err := s.BeginLockID(cancelled, "release", id); !errors.Is(err, locking.ErrAborted) {
		t.Errorf("cancelled: %v", err)
	}

	c, err := s.BeginKey(ctx, "lookup", "k")
	if err != nil || c.Errors.Op != "lookup" || c.Errors.KeyHash != locking.HashKey("k") || c.LockKey != "k" {
		t.Fatalf("BeginKey = %+v, %v", c, err)
	}
	if _, err := s.BeginKey(cancelled, "lookup", "__k__"); !errors.Is(err, locking.ErrInvalidArgument) {
		t.Errorf("invalid key: %v", err)
	}
	if _, err := s.BeginKey(cancelled, "lookup", "k"); !errors.Is(err, locking.ErrAborted) {
		t.Errorf("cancelled: %v", err)
	}
}
