package main

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/firestore"
	vkit "cloud.google.com/go/firestore/apiv1"
	"github.com/spf13/pflag"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/locking/lockstore"
	"github.com/snapwriter/snapwriter/locking/pglock"
)

// Lock backends --lock-backend names; the names are what a snapshot root
// records as writerLockBackend.
const (
	backendFirestore = lockstore.Firestore
	backendPostgres  = lockstore.Postgres
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

// validate reports lockstore's checks, made without connecting, as usage
// errors that never show the DSN's password.
func (f lockFlags) validate() error {
	switch err := (lockstore.Config{Backend: f.backend, DSN: f.dsn}).Check(); {
	case errors.Is(err, lockstore.ErrUnknownBackend):
		return usagef("--lock-backend %q: want firestore or postgres", f.backend)
	case errors.Is(err, lockstore.ErrDSNUnused):
		return usagef("--lock-dsn is only for --lock-backend postgres (the lock backend is %q)", f.backend)
	case errors.Is(err, lockstore.ErrDSNRequired):
		return usagef("--lock-backend postgres needs --lock-dsn (or SNAPWRITER_LOCK_DSN)")
	case err != nil:
		return usagef("--lock-dsn: not a PostgreSQL connection string (%v)", errors.Unwrap(err))
	}
	return nil
}

// writeLocker opens the lock backend of a writer, and of lock release.
// On Firestore it gets a client of its own, and so a gRPC
// connection of its own: the lease's renewals then never wait behind the
// writer's own requests on a shared connection, where a writer's load
// would starve the one request that keeps its lock. The PostgreSQL
// backend has its pool anyway. On Firestore the lock's acquire, renewals
// and release run on an API client of its own too, each a transaction
// begun by its read (firestorelock.WithAPIClient: two round trips, not
// three). The func returned closes the backend and those clients.
func (a *app) writeLocker(ctx context.Context, f lockFlags) (locking.Backend, func(), error) {
	var (
		client *firestore.Client
		api    *vkit.Client
		extra  []lockstore.Option
	)
	closeClients := func() {
		if client != nil {
			_ = client.Close()
		}
		if api != nil {
			_ = api.Close()
		}
	}
	if f.backend == backendFirestore {
		var err error
		if client, err = a.client(ctx); err != nil {
			return nil, nil, err
		}
		if api, err = a.newAPIClient(ctx); err != nil {
			closeClients()
			return nil, nil, a.firestoreWait(fmt.Errorf("connecting to Firestore: %w", err))
		}
		extra = append(extra, lockstore.WithFirestoreOptions(firestorelock.WithAPIClient(api)))
	}
	b, closeLocker, err := a.openLockerWith(ctx, client, f, extra)
	if err != nil {
		closeClients()
		return nil, nil, err
	}
	// The backend first: its Close waits for the reads a cancelled call
	// left to roll back, on api.
	return b, func() {
		closeLocker()
		closeClients()
	}, nil
}

// openLocker opens the lock backend the flags name (see lockstore.Open),
// connecting to PostgreSQL within --timeout (--request-timeout on a write
// command), and names the database in
// the error when it cannot be reached.
func (a *app) openLocker(ctx context.Context, client *firestore.Client, f lockFlags, pgOpts ...pglock.Option) (locking.Backend, func(), error) {
	return a.openLockerWith(ctx, client, f, nil, pgOpts...)
}

// openLockerWith is openLocker with extra options for lockstore.Open.
func (a *app) openLockerWith(ctx context.Context, client *firestore.Client, f lockFlags, extra []lockstore.Option, pgOpts ...pglock.Option) (locking.Backend, func(), error) {
	opts := append([]lockstore.Option{lockstore.WithLogger(a.log), lockstore.WithConnectTimeout(a.bound()),
		lockstore.WithPostgresOptions(pgOpts...)}, extra...)
	b, closeLocker, err := lockstore.Open(ctx, lockstore.Config{Backend: f.backend, DSN: f.dsn}, client, opts...)
	if err != nil && f.backend == backendPostgres && !errors.Is(err, locking.ErrInvalidArgument) {
		err = a.postgresWait(err, f.dsn)
	}
	return b, closeLocker, err
}
