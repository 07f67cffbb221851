package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/backendkit"
)

// specPeer performs SyncGuard's TypeScript backend's
// multi-statement transactions, one round trip per statement, literally:
// the baseline the benchmark compares against, and a stand-in for a
// TypeScript peer sharing the tables in the interop tests.
type specPeer struct {
	pool          *pgxpool.Pool
	locks, fences string
}

func (p specPeer) nowMs(ctx context.Context, tx pgx.Tx) (int64, error) {
	var now float64
	err := tx.QueryRow(ctx, `SELECT EXTRACT(EPOCH FROM NOW()) * 1000 AS now_ms`).Scan(&now)
	return int64(now), err
}

// Acquire is SyncGuard's acquire: advisory lock, server time, read the lock
// row, two-step fence increment, upsert the lock.
func (p specPeer) Acquire(ctx context.Context, key string, ttl time.Duration) (locking.AcquireResult, error) {
	k, err := storage().Keys("acquire", key)
	if err != nil {
		return locking.AcquireResult{}, err
	}
	nkey, storageKey, fenceKey := k.Key, k.LockKey, k.FenceKey
	lockID, _ := backendkit.NewLockID()
	var res locking.AcquireResult
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, storageKey); err != nil {
			return err
		}
		now, err := p.nowMs(ctx, tx)
		if err != nil {
			return err
		}
		var expires int64
		err = tx.QueryRow(ctx, `SELECT expires_at_ms FROM `+ident(p.locks)+` WHERE key = $1 FOR UPDATE`, storageKey).Scan(&expires)
		switch {
		case err == nil && locking.IsLive(expires, now):
			return nil
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+ident(p.fences)+` (fence_key, fence, key_debug) VALUES ($1, 0, $2)
ON CONFLICT (fence_key) DO NOTHING`, fenceKey, nkey); err != nil {
			return err
		}
		var n uint64
		if err := tx.QueryRow(ctx, `UPDATE `+ident(p.fences)+` SET fence = fence + 1 WHERE fence_key = $1 RETURNING fence`, fenceKey).Scan(&n); err != nil {
			return err
		}
		fence, err := backendkit.FormatFence(n)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+ident(p.locks)+` (key, lock_id, expires_at_ms, acquired_at_ms, fence, user_key)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (key) DO UPDATE SET lock_id = EXCLUDED.lock_id, expires_at_ms = EXCLUDED.expires_at_ms,
  acquired_at_ms = EXCLUDED.acquired_at_ms, fence = EXCLUDED.fence, user_key = EXCLUDED.user_key`,
			storageKey, lockID, now+ttl.Milliseconds(), now, fence, nkey); err != nil {
			return err
		}
		res = locking.AcquireResult{OK: true, LockID: lockID, ExpiresAt: time.UnixMilli(now + ttl.Milliseconds()), Fence: fence}
		return nil
	})
	return res, err
}

// mutate is SyncGuard's release/extend: server time, the row by lock_id FOR
// UPDATE, the ownership and liveness checks, then change.
func (p specPeer) mutate(ctx context.Context, lockID string, change func(tx pgx.Tx, key string, now int64) error) (bool, error) {
	var ok bool
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		now, err := p.nowMs(ctx, tx)
		if err != nil {
			return err
		}
		var key, id string
		var expires int64
		err = tx.QueryRow(ctx, `SELECT key, lock_id, expires_at_ms FROM `+ident(p.locks)+` WHERE lock_id = $1 FOR UPDATE`, lockID).Scan(&key, &id, &expires)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return err
		case id != lockID || !locking.IsLive(expires, now):
			return nil
		}
		ok = true
		return change(tx, key, now)
	})
	return ok, err
}

func (p specPeer) Release(ctx context.Context, lockID string) (bool, error) {
	return p.mutate(ctx, lockID, func(tx pgx.Tx, key string, _ int64) error {
		_, err := tx.Exec(ctx, `DELETE FROM `+ident(p.locks)+` WHERE key = $1`, key)
		return err
	})
}

func (p specPeer) Extend(ctx context.Context, lockID string, ttl time.Duration) (locking.ExtendResult, error) {
	var expires int64
	ok, err := p.mutate(ctx, lockID, func(tx pgx.Tx, key string, now int64) error {
		expires = now + ttl.Milliseconds()
		tag, err := tx.Exec(ctx, `UPDATE `+ident(p.locks)+` SET expires_at_ms = $1 WHERE key = $2`, expires, key)
		if err == nil && tag.RowsAffected() != 1 {
			err = fmt.Errorf("extend updated %d rows", tag.RowsAffected())
		}
		return err
	})
	if err != nil || !ok {
		return locking.ExtendResult{}, err
	}
	return locking.ExtendResult{OK: true, ExpiresAt: time.UnixMilli(expires)}, nil
}
