package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/snapwriter/snapwriter/internal/doctor"
	"github.com/snapwriter/snapwriter/internal/storeerr"
	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/pglock"
)

// lockBackend checks the lock store --lock-backend names.
func (d *preflight) lockBackend(ctx context.Context, earlier doctor.Results) doctor.Result {
	w, _ := earlier[checkCredentials].Data.(who)
	if d.f.lock.backend != backendPostgres {
		return d.firestoreLock(ctx, w)
	}
	return d.postgresLock(ctx)
}

// pgColumn is a column as information_schema.columns describes it.
type pgColumn struct{ name, dataType string }

// pgTables are SyncGuard's tables and their columns, as pglock.Schema
// creates them.
func pgTables() map[string][]pgColumn {
	return map[string][]pgColumn{
		pglock.DefaultLockTable: {{"key", "text"}, {"lock_id", "text"}, {"expires_at_ms", "bigint"},
			{"acquired_at_ms", "bigint"}, {"fence", "text"}, {"user_key", "text"}},
		pglock.DefaultFenceTable: {{"fence_key", "text"}, {"fence", "bigint"}, {"key_debug", "text"}},
	}
}

// postgresLock connects to the PostgreSQL lock database read-only: its
// time, and its tables' shape and privileges. It creates nothing, unlike
// the backend itself, which creates missing tables on the first write.
func (d *preflight) postgresLock(ctx context.Context) doctor.Result {
	ctx, cancel := d.bounded(ctx)
	defer cancel()
	dsn := d.f.lock.dsn
	endpoint := pglock.Endpoint(dsn)
	pool, err := pglock.NewPool(ctx, dsn)
	if err != nil {
		return doctor.Problemf("correct --lock-dsn", "%s: %v", endpoint, err)
	}
	defer pool.Close()
	var now time.Time
	var canCreate bool
	var schema string
	sent := d.a.now()
	err = pool.QueryRow(ctx, `SELECT now(), current_schema(), has_schema_privilege(current_schema(), 'CREATE')`).Scan(&now, &schema, &canCreate)
	answered := d.a.now()
	if err != nil {
		return d.postgresProblem(err)
	}
	clock := serverTime{source: "PostgreSQL", server: now, sent: sent, answered: answered}
	var missing []string
	for _, table := range []string{pglock.DefaultLockTable, pglock.DefaultFenceTable} {
		r, exists := d.pgTable(ctx, pool, table)
		if r.Status == doctor.Problem {
			r.Data = clock
			return r
		}
		if !exists {
			missing = append(missing, table)
		}
	}
	r := doctor.Okf("PostgreSQL at %s: tables %s and %s are SyncGuard's", endpoint, pglock.DefaultLockTable, pglock.DefaultFenceTable)
	switch {
	case len(missing) > 0 && !canCreate:
		r = doctor.Problemf(fmt.Sprintf(`psql "$SNAPWRITER_LOCK_DSN" -c 'GRANT CREATE ON SCHEMA %s TO CURRENT_USER' (as the schema's owner), or create the tables with the DDL in docs/postgres-lock.md`, schema),
			"PostgreSQL at %s: %v do not exist yet, and this user may not create them in schema %s", endpoint, missing, schema)
	case len(missing) > 0:
		r = doctor.Okf("PostgreSQL at %s: %v do not exist yet; the first write creates them (fine)", endpoint, missing)
	}
	r.Data = clock
	return r
}

// pgTable checks one table: whether it exists, its columns, the unique
// lock_id index of the lock table, and this user's privileges on it.
func (d *preflight) pgTable(ctx context.Context, pool *pgxpool.Pool, table string) (doctor.Result, bool) {
	var exists, sel, ins, upd, del, uniqueLockID bool
	err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL,
  COALESCE(has_table_privilege(to_regclass($1), 'SELECT'), false), COALESCE(has_table_privilege(to_regclass($1), 'INSERT'), false),
  COALESCE(has_table_privilege(to_regclass($1), 'UPDATE'), false), COALESCE(has_table_privilege(to_regclass($1), 'DELETE'), false),
  EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
          WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indnatts = 1 AND a.attname = 'lock_id')`,
		table).Scan(&exists, &sel, &ins, &upd, &del, &uniqueLockID)
	if err != nil {
		return d.postgresProblem(err), false
	}
	if !exists {
		return doctor.Result{}, false
	}
	rows, err := pool.Query(ctx, `SELECT column_name, data_type FROM information_schema.columns
WHERE table_name = $1 AND table_schema = (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass($1))`, table)
	if err != nil {
		return d.postgresProblem(err), true
	}
	got := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			rows.Close()
			return d.postgresProblem(err), true
		}
		got[name] = typ
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return d.postgresProblem(err), true
	}
	var wrong []string
	for _, c := range pgTables()[table] {
		switch typ, ok := got[c.name]; {
		case !ok:
			wrong = append(wrong, "no column "+c.name)
		case typ != c.dataType:
			wrong = append(wrong, fmt.Sprintf("column %s is %s, want %s", c.name, typ, c.dataType))
		}
	}
	rename := fmt.Sprintf(`psql "$SNAPWRITER_LOCK_DSN" -c 'ALTER TABLE %s RENAME TO %s_old' (it is not SyncGuard's; the first write then creates SyncGuard's)`, table, table)
	switch {
	case len(wrong) > 0:
		return doctor.Problemf(rename, "table %s is not shaped as SyncGuard's: %v", table, wrong), true
	case table == pglock.DefaultLockTable && !uniqueLockID:
		return doctor.Problemf(fmt.Sprintf(`psql "$SNAPWRITER_LOCK_DSN" -c 'CREATE UNIQUE INDEX IF NOT EXISTS idx_%s_lock_id ON %s (lock_id)'`, table, table),
			"table %s has no unique index on lock_id, which release and extend rely on", table), true
	case !sel || !ins || !upd || table == pglock.DefaultLockTable && !del:
		return doctor.Problemf(fmt.Sprintf(`psql "$SNAPWRITER_LOCK_DSN" -c 'GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO CURRENT_USER' (as the table's owner)`, table),
			"this user lacks privileges on %s (select %t, insert %t, update %t, delete %t)", table, sel, ins, upd, del), true
	}
	return doctor.Okf(""), true
}

// postgresProblem words a failed request to the PostgreSQL lock database
// --lock-dsn names, and its fix; the error's text has the DSN's password
// masked.
func (d *preflight) postgresProblem(err error) doctor.Result {
	endpoint := pglock.Endpoint(d.f.lock.dsn)
	err = pglock.Redact(d.f.lock.dsn, err)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "28P01", "28000":
			return doctor.Problemf("correct the user in --lock-dsn and the password in PGPASSWORD or ~/.pgpass",
				"PostgreSQL at %s refused the login: %s", endpoint, pgErr.Message)
		case "3D000":
			return doctor.Problemf(`createdb DBNAME (on that server), or correct dbname in --lock-dsn`,
				"PostgreSQL at %s: %s", endpoint, pgErr.Message)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || storeerr.Unreachable(err) || errors.Is(err, locking.ErrServiceUnavailable) || pgconn.Timeout(err) || isConnectError(err) {
		return doctor.Problemf("start PostgreSQL there, or correct host and port in --lock-dsn (pg_isready -h HOST -p PORT tells whether it accepts connections)",
			"%s is unreachable within %s: %v", endpoint, d.share(), err)
	}
	return doctor.Problemf("see the error; check --lock-dsn", "PostgreSQL at %s: %v", endpoint, err)
}

// isConnectError reports whether err is a failure to connect.
func isConnectError(err error) bool {
	var ce *pgconn.ConnectError
	return errors.As(err, &ce)
}

// maxClockSkew is how far this machine's clock may be off the server's.
// It is locking.TimeTolerance (1s): the Firestore lock backend decides a
// lock's expiry on the writer's own clock, and its liveness predicate
// allows that much for clocks that disagree; a clock further ahead takes
// another writer's lock before it expired (fencing then stops the older
// writer, which fails instead of finishing), one further behind waits
// past its expiry. With PostgreSQL the server decides, but the times the
// writer records and pglock's warnings use this clock too. Skew is counted
// only beyond the measurement's own uncertainty, half the round trip.
const maxClockSkew = locking.TimeTolerance

// clock compares this machine's clock with the server's, as read by the
// lock backend check (PostgreSQL) or the database check (Firestore).
func (d *preflight) clock(_ context.Context, earlier doctor.Results) doctor.Result {
	from := checkDatabase
	if d.f.lock.backend == backendPostgres {
		from = checkLock
	}
	t, ok := earlier[from].Data.(serverTime)
	if !ok {
		return doctor.Skippedf("no server time to compare with, because %s failed", from)
	}
	rtt := t.answered.Sub(t.sent)
	local := t.sent.Add(rtt / 2)
	skew := t.server.Sub(local)
	abs := skew
	if abs < 0 {
		abs = -abs
	}
	dir := "ahead of"
	if skew > 0 {
		dir = "behind"
	}
	uncertainty := rtt / 2
	figure := fmt.Sprintf("%s (±%s)", abs.Round(time.Millisecond), uncertainty.Round(time.Millisecond))
	if abs-uncertainty > maxClockSkew {
		return doctor.Problemf("synchronise this machine's clock (sudo timedatectl set-ntp true, or chrony/ntpd); on Cloud Run the clock is Google's",
			"this clock is %s %s %s's, more than the %s a lock tolerates", figure, dir, t.source, maxClockSkew)
	}
	return doctor.Okf("this clock is %s %s %s's (tolerated: %s)", figure, dir, t.source, maxClockSkew)
}
