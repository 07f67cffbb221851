package pglock

import (
	"fmt"
	"strings"

	"github.com/snapwriter/snapwriter/locking"
)

// queries holds the SQL for one pair of tables, built once by New from
// validated, quoted names: no value is ever put into SQL text, only into
// parameters.
type queries struct {
	acquireLock, acquireCounter, acquire string
	release, extend                      string
	readKey, readLockID, cleanup         string
}

// nowMs is the server's time in Unix milliseconds. clock_timestamp, not
// now(): now() is the start of the transaction, which for acquire is before
// the advisory-lock wait, so a lock freed during the wait would still look
// live and a new lock would get less than its TTL. Every query that uses it
// evaluates it once, in a MATERIALIZED CTE or a plain subquery.
const nowMs = `floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint`

// livePredicate is locking.IsLive in SQL, for the statements that decide
// and mutate in one go: a lock expiring at expires is live at now until
// locking.TimeTolerance after its expiry. TestLivePredicateMatchesIsLive
// holds the two to the same answers.
func livePredicate(expires, now string) string {
	return fmt.Sprintf("(%s > %s - %d)", expires, now, locking.TimeTolerance.Milliseconds())
}

func newQueries(locks, fences string) queries {
	l, f := ident(locks), ident(fences)
	r := strings.NewReplacer("{L}", l, "{F}", f, "{now}", nowMs,
		"{live}", livePredicate("cur.expires_at_ms", "t.now_ms"))
	return queries{
		// Step 0, as SyncGuard's: serialise acquires of this key, with
		// TypeScript peers too.
		acquireLock: `SELECT pg_advisory_xact_lock(hashtext($1))`,
		// Step 1: the counter row exists (the absent-row race fix).
		acquireCounter: r.Replace(`INSERT INTO {F} (fence_key, fence, key_debug) VALUES ($1, 0, $2)
ON CONFLICT (fence_key) DO NOTHING`),
		// Steps 2 and 3, one statement: lock the current row; if it is not
		// live, increment the counter (never past $6, the maximum fence;
		// never below a fence stamped on the lock row, should the counter
		// have been deleted against the rules) and write the new lock.
		// $1 storage key, $2 fence key, $3 lockId, $4 TTL ms, $5 user key.
		acquire: r.Replace(`WITH t AS MATERIALIZED (SELECT {now} AS now_ms),
cur AS MATERIALIZED (SELECT expires_at_ms, fence FROM {L} WHERE key = $1 FOR UPDATE),
free AS MATERIALIZED (SELECT t.now_ms FROM t WHERE NOT EXISTS (SELECT 1 FROM cur WHERE {live})),
stamped AS (SELECT coalesce(max(CASE WHEN fence ~ '^[0-9]{15}$' THEN fence::bigint END), 0) AS n FROM cur),
f AS (UPDATE {F} AS c SET fence = greatest(c.fence, stamped.n) + 1 FROM free, stamped
      WHERE c.fence_key = $2 AND greatest(c.fence, stamped.n) < $6::bigint
      RETURNING c.fence, free.now_ms),
ins AS (INSERT INTO {L} AS l (key, lock_id, expires_at_ms, acquired_at_ms, fence, user_key)
        SELECT $1, $3, f.now_ms + $4::bigint, f.now_ms, lpad(f.fence::text, 15, '0'), $5 FROM f
        ON CONFLICT (key) DO UPDATE SET lock_id = EXCLUDED.lock_id, expires_at_ms = EXCLUDED.expires_at_ms,
          acquired_at_ms = EXCLUDED.acquired_at_ms, fence = EXCLUDED.fence, user_key = EXCLUDED.user_key
        RETURNING l.fence, l.expires_at_ms)
SELECT t.now_ms, (SELECT expires_at_ms FROM cur), EXISTS (SELECT 1 FROM free),
       (SELECT fence FROM ins), (SELECT expires_at_ms FROM ins)
FROM t`),
		// Find by lock_id FOR UPDATE; delete only if it carries $1 (the
		// explicit ownership check) and is live.
		release: r.Replace(`WITH t AS MATERIALIZED (SELECT {now} AS now_ms),
cur AS MATERIALIZED (SELECT key, lock_id, expires_at_ms FROM {L} WHERE lock_id = $1 FOR UPDATE),
d AS (DELETE FROM {L} AS l USING cur, t WHERE l.key = cur.key AND cur.lock_id = $1 AND {live} RETURNING l.key)
SELECT t.now_ms, (SELECT expires_at_ms FROM cur), (SELECT lock_id FROM cur), (SELECT count(*) FROM d), NULL::bigint
FROM t`),
		// As release, setting the expiry to the server's now + $2 ms.
		extend: r.Replace(`WITH t AS MATERIALIZED (SELECT {now} AS now_ms),
cur AS MATERIALIZED (SELECT key, lock_id, expires_at_ms FROM {L} WHERE lock_id = $1 FOR UPDATE),
u AS (UPDATE {L} AS l SET expires_at_ms = t.now_ms + $2::bigint FROM cur, t
      WHERE l.key = cur.key AND cur.lock_id = $1 AND {live} RETURNING l.expires_at_ms)
SELECT t.now_ms, (SELECT expires_at_ms FROM cur), (SELECT lock_id FROM cur), (SELECT count(*) FROM u),
       (SELECT expires_at_ms FROM u)
FROM t`),
		readKey: r.Replace(`SELECT t.now_ms, l.key, l.lock_id, l.expires_at_ms, l.acquired_at_ms, l.fence, l.user_key
FROM (SELECT {now} AS now_ms) t LEFT JOIN {L} l ON l.key = $1`),
		readLockID: r.Replace(`SELECT t.now_ms, l.key, l.lock_id, l.expires_at_ms, l.acquired_at_ms, l.fence, l.user_key
FROM (SELECT {now} AS now_ms) t LEFT JOIN {L} l ON l.lock_id = $1`),
		// Only the lock table, only the row IsLocked saw, only if still
		// expired past the guard ($3 ms).
		cleanup: r.Replace(`DELETE FROM {L} WHERE key = $1 AND lock_id = $2 AND expires_at_ms < {now} - $3::bigint`),
	}
}
