package main

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/firestore"
	"github.com/spf13/pflag"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/locking/pglock"
)

// Lock backends --lock-backend names; the names are what a snapshot root
// records as writerLockBackend.
const (
	backendFirestore = "firestore"
	backendPostgres  = "postgres"
)

// lockFlags choose the lock backend; the write commands and the lock
// commands share them.
type lockFlags struct {
	backend string
	dsn     string
}

func (f *lockFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.backend, "lock-backend", backendFirestore,
		`where locks live: "firestore" (collections locks and fence_counters) or "postgres" (tables syncguard_locks and syncguard_fence_counters at --lock-dsn)`)
	fl.StringVar(&f.dsn, "lock-dsn", "",
		`PostgreSQL connection string for --lock-backend postgres, as libpq takes it ("postgres://user@host:5432/db?sslmode=verify-full" or "host=… dbname=…"); the password is best left to PGPASSWORD or ~/.pgpass`)
}

// validate checks the flags without connecting: an unknown backend, a
// missing or malformed DSN, or a DSN given to the Firestore backend is a
// usage error. The error never shows the DSN's password.
func (f lockFlags) validate() error {
	switch f.backend {
	case backendFirestore:
		if f.dsn != "" {
			return usagef("--lock-dsn is only for --lock-backend postgres (the lock backend is %q)", f.backend)
		}
	case backendPostgres:
		if f.dsn == "" {
			return usagef("--lock-backend postgres needs --lock-dsn (or SNAPWRITER_LOCK_DSN)")
		}
		if _, err := pglock.ParseDSN(f.dsn); err != nil {
			return usagef("--lock-dsn: not a PostgreSQL connection string (%v)", errors.Unwrap(err))
		}
	default:
		return usagef("--lock-backend %q: want firestore or postgres", f.backend)
	}
	return nil
}

// writeLocker opens the lock backend of a writer. On Firestore it gets a
// client of its own, and so a gRPC connection of its own: the lease's
// renewals then never wait behind the writer's own requests on a shared
// connection (issue 25: a writer's load starved the one request that
// keeps its lock). The PostgreSQL backend has its pool anyway. The func
// returned closes the backend and that client.
func (a *app) writeLocker(ctx context.Context, f lockFlags) (locking.Backend, func(), error) {
	if f.backend == backendPostgres {
		return a.openLocker(ctx, nil, f)
	}
	client, err := a.client(ctx)
	if err != nil {
		return nil, nil, err
	}
	b, closeLocker, err := a.openLocker(ctx, client, f)
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	return b, func() {
		closeLocker()
		_ = client.Close()
	}, nil
}

// openLocker returns the lock backend the flags name and a func that
// releases what it holds (the backend's background work, and the pool it
// opened). The Firestore backend uses client; the PostgreSQL one opens a
// pool of its own (and creates its tables if they are missing, unless
// pgOpts say otherwise) within --timeout, so a database that cannot be
// reached fails here, before anything is written, with its host:port
// named.
func (a *app) openLocker(ctx context.Context, client *firestore.Client, f lockFlags, pgOpts ...pglock.Option) (locking.Backend, func(), error) {
	if f.backend != backendPostgres {
		b, err := firestorelock.New(client, firestorelock.WithLogger(a.log))
		if err != nil {
			return nil, nil, err
		}
		return b, func() { _ = b.Close() }, nil
	}
	cctx, cancel := context.WithTimeout(ctx, a.bound())
	defer cancel()
	pool, err := pglock.NewPool(cctx, f.dsn)
	var b *pglock.Backend
	if err == nil {
		if b, err = pglock.New(cctx, pool, append([]pglock.Option{pglock.WithLogger(a.log)}, pgOpts...)...); err != nil {
			pool.Close()
		}
	}
	if err != nil {
		err = pglock.Redact(f.dsn, err)
		if errors.Is(err, locking.ErrInvalidArgument) {
			return nil, nil, fmt.Errorf("PostgreSQL lock tables: %w", err)
		}
		return nil, nil, a.postgresWait(fmt.Errorf("connecting to the PostgreSQL lock database: %w", err), f.dsn)
	}
	return b, func() {
		_ = b.Close() // its cleanups use the pool: stop them first
		pool.Close()
	}, nil
}
