// Package lockstore opens the lock backend a configuration names, Firestore
// (locking/firestorelock) or PostgreSQL (locking/pglock), for programs that
// let their user choose: Config says which, Check validates it without
// connecting, and Open opens it.
package lockstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/locking/pglock"
)

// The backends, by the names locking.Capabilities.Backend gives them.
const (
	Firestore = "firestore" // collections "locks" and "fence_counters"
	Postgres  = "postgres"  // tables "syncguard_locks" and "syncguard_fence_counters"
)

// Config names a lock store.
type Config struct {
	Backend string // Firestore or Postgres
	// DSN is the PostgreSQL connection string, as libpq takes it; for
	// Postgres only.
	DSN string
}

// The errors of Check, for errors.Is.
var (
	ErrUnknownBackend = errors.New("lockstore: unknown backend")
	ErrDSNRequired    = errors.New("lockstore: the postgres backend needs a DSN")
	ErrDSNUnused      = errors.New("lockstore: a DSN is only for the postgres backend")
)

// Check validates c without connecting. A DSN that does not parse fails
// with pglock.ParseDSN's error: a locking.InvalidArgument *locking.Error
// whose cause never shows the DSN's password.
func (c Config) Check() error {
	switch c.Backend {
	case Firestore:
		if c.DSN != "" {
			return ErrDSNUnused
		}
	case Postgres:
		if c.DSN == "" {
			return ErrDSNRequired
		}
		if _, err := pglock.ParseDSN(c.DSN); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w %q", ErrUnknownBackend, c.Backend)
	}
	return nil
}

// Option configures Open.
type Option func(*options)

type options struct {
	log     *zap.Logger
	timeout time.Duration
	pg      []pglock.Option
	fs      []firestorelock.Option
}

// WithLogger makes the backend log to l; by default, or with a nil l, it
// does not log.
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.log = l } }

// WithConnectTimeout bounds connecting to PostgreSQL, and preparing its
// tables, to d; by default only ctx bounds them.
func WithConnectTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithPostgresOptions passes opts to pglock.New, after lockstore's own.
func WithPostgresOptions(opts ...pglock.Option) Option {
	return func(o *options) { o.pg = append(o.pg, opts...) }
}

// WithFirestoreOptions passes opts to firestorelock.New, after
// lockstore's own (for instance firestorelock.WithAPIClient).
func WithFirestoreOptions(opts ...firestorelock.Option) Option {
	return func(o *options) { o.fs = append(o.fs, opts...) }
}

// Open checks c and opens the backend it names, and returns the func that
// releases what the backend holds (its background work, and the pool it
// opened). Firestore uses client, which the caller keeps and closes after.
// PostgreSQL opens a pool of its own and creates its tables if they are
// missing (unless WithPostgresOptions says otherwise), so a database that
// cannot be reached fails here, before anything is locked. Its errors
// never show the DSN's password: "PostgreSQL lock tables: …" when the
// tables are unusable (InvalidArgument), "connecting to the PostgreSQL
// lock database: …" otherwise.
func Open(ctx context.Context, c Config, client *firestore.Client, opts ...Option) (locking.Backend, func(), error) {
	if err := c.Check(); err != nil {
		return nil, nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	if c.Backend == Firestore {
		b, err := firestorelock.New(client, append([]firestorelock.Option{firestorelock.WithLogger(o.log)}, o.fs...)...)
		if err != nil {
			return nil, nil, err
		}
		return b, func() { _ = b.Close() }, nil
	}
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	pool, err := pglock.NewPool(ctx, c.DSN)
	var b *pglock.Backend
	if err == nil {
		if b, err = pglock.New(ctx, pool, append([]pglock.Option{pglock.WithLogger(o.log)}, o.pg...)...); err != nil {
			pool.Close()
		}
	}
	if err != nil {
		err = pglock.Redact(c.DSN, err)
		if errors.Is(err, locking.ErrInvalidArgument) {
			return nil, nil, fmt.Errorf("PostgreSQL lock tables: %w", err)
		}
		return nil, nil, fmt.Errorf("connecting to the PostgreSQL lock database: %w", err)
	}
	return b, func() {
		_ = b.Close() // its cleanups use the pool: stop them first
		pool.Close()
	}, nil
}
