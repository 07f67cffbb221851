package backendkit

import (
	"context"
	"time"

	"github.com/snapwriter/snapwriter/locking"
)

// Storage says what a backend's storage accepts and how its failures map,
// so that the checks every operation makes before its I/O, and the errors
// it returns, are the same on every backend. A backend keeps one and starts
// each operation with BeginAcquire, BeginKey or BeginLockID.
type Storage struct {
	// MaxIDBytes is the longest storage id (document id, primary key) in
	// UTF-8 bytes; a longer key is stored under its hash (MakeStorageKey).
	MaxIDBytes int
	// CheckKey, if set, refuses an NFC-normalised key that this storage
	// cannot hold for a reason beyond the common rules (PostgreSQL text
	// cannot hold NUL). Its error is reported as InvalidArgument.
	CheckKey func(nkey string) error
	// Classify maps a storage error to a code, as OpErrors.Classify does.
	Classify func(ctx context.Context, err error) locking.Code
}

// Keys is a validated key and the ids a backend stores it under.
type Keys struct {
	Key      string // the caller's key, NFC-normalised
	KeyHash  string // locking.HashKey(Key), for errors and logs
	LockKey  string // the lock record's id: MakeStorageKey("", Key, MaxIDBytes, 0)
	FenceKey string // the fence counter's id: MakeStorageKey("", "fence:"+LockKey, MaxIDBytes, 0)
}

// Keys validates key for operation op and derives its storage ids, the
// fence counter's from the lock record's so both hash alike should either
// need it. Errors are InvalidArgument, named op.
func (s Storage) Keys(op, key string) (Keys, error) {
	nkey, err := locking.NormalizeAndValidateKey(key)
	if err != nil {
		return Keys{}, WithOp(err, op)
	}
	k := Keys{Key: nkey, KeyHash: locking.HashKey(nkey)}
	if s.CheckKey != nil {
		if err := s.CheckKey(nkey); err != nil {
			return Keys{}, &locking.Error{Code: locking.InvalidArgument, Op: op, KeyHash: k.KeyHash, Err: err}
		}
	}
	if k.LockKey, err = MakeStorageKey("", nkey, s.MaxIDBytes, 0); err != nil {
		return Keys{}, WithOp(err, op)
	}
	if k.FenceKey, err = MakeStorageKey("", "fence:"+k.LockKey, s.MaxIDBytes, 0); err != nil {
		return Keys{}, WithOp(err, op)
	}
	return k, nil
}

// Errors returns the builder of operation op's errors, with this
// storage's classification and nothing yet to name or scrub.
func (s Storage) Errors(op string) *OpErrors {
	return &OpErrors{Op: op, Classify: s.Classify}
}

// KeyCall is an operation on a key, checked and ready for its I/O.
type KeyCall struct {
	Keys
	// Errors builds the operation's errors: named, with the key's hash,
	// and with the raw key and its storage ids scrubbed.
	Errors *OpErrors
}

// BeginKey checks an operation on key (IsLocked, a lookup) before its
// I/O: the key must be valid (InvalidArgument) and ctx not ended (Aborted,
// or NetworkTimeout for a deadline).
func (s Storage) BeginKey(ctx context.Context, op, key string) (KeyCall, error) {
	c, err := s.keyCall(op, key)
	if err != nil {
		return KeyCall{}, err
	}
	if ctx.Err() != nil {
		return KeyCall{}, c.Errors.Ended(ctx)
	}
	return c, nil
}

func (s Storage) keyCall(op, key string) (KeyCall, error) {
	k, err := s.Keys(op, key)
	if err != nil {
		return KeyCall{}, err
	}
	e := s.Errors(op)
	e.KeyHash = k.KeyHash
	e.Secrets = []string{key, k.Key, k.LockKey, k.FenceKey}
	return KeyCall{Keys: k, Errors: e}, nil
}

// AcquireCall is an Acquire, checked and ready for its I/O.
type AcquireCall struct {
	KeyCall
	// LockID is the new lock's lockId, fresh from NewLockID; Errors
	// scrubs it too.
	LockID string
}

// BeginAcquire checks an Acquire before its I/O, in the order every
// backend reports them: the key (InvalidArgument), the ttl
// (InvalidArgument), then ctx (Aborted, or NetworkTimeout for a deadline);
// then it draws the new lock's lockId.
func (s Storage) BeginAcquire(ctx context.Context, key string, ttl time.Duration) (AcquireCall, error) {
	const op = "acquire"
	c, err := s.keyCall(op, key)
	if err != nil {
		return AcquireCall{}, err
	}
	if err := locking.ValidateTTL(ttl); err != nil {
		return AcquireCall{}, WithOp(err, op)
	}
	if ctx.Err() != nil {
		return AcquireCall{}, c.Errors.Ended(ctx)
	}
	id, err := NewLockID()
	if err != nil {
		return AcquireCall{}, WithOp(err, op)
	}
	c.Errors.Secrets = append(c.Errors.Secrets, id)
	return AcquireCall{KeyCall: c, LockID: id}, nil
}

// BeginLockID checks an operation on a lockId (release, extend, a lookup)
// before its I/O: the lockId must be well-formed (InvalidArgument) and ctx
// not ended (Aborted, or NetworkTimeout for a deadline). The returned
// builder names the lockId's hash and scrubs the lockId.
func (s Storage) BeginLockID(ctx context.Context, op, lockID string) (*OpErrors, error) {
	if err := locking.ValidateLockID(lockID); err != nil {
		return nil, WithOp(err, op)
	}
	e := s.Errors(op)
	e.LockIDHash = locking.HashKey(lockID)
	e.Secrets = []string{lockID}
	if ctx.Err() != nil {
		return nil, e.Ended(ctx)
	}
	return e, nil
}
