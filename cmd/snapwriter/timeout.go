package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/snapwriter/snapwriter/internal/ending"
	"github.com/snapwriter/snapwriter/internal/storeerr"
	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/pglock"
	"github.com/snapwriter/snapwriter/retry"
	"github.com/snapwriter/snapwriter/snapshot"
)

// Defaults of --timeout, the bound on waiting for Firestore or the
// PostgreSQL lock database. The write commands (write, repair, backfill,
// schedule) default to snapshot.DefaultRequestTimeout.
const (
	// defaultReadTimeout bounds get and list, the whole command.
	defaultReadTimeout = 60 * time.Second
	// defaultLockCommandTimeout bounds lock status and lock release, the
	// whole command.
	defaultLockCommandTimeout = 30 * time.Second
	// fallbackTimeout bounds waits of a command without --timeout.
	fallbackTimeout = 30 * time.Second
)

// Usage texts of --timeout.
const (
	getTimeoutUsage  = "give up (exit 1) when Firestore has not answered within this time; bounds the whole command"
	listTimeoutUsage = "give up (exit 1) when Firestore or the PostgreSQL lock database has not answered within this time; " +
		"bounds the whole command"
	lockTimeoutUsage  = "give up (exit 1) when the lock store has not answered within this time; bounds the whole command"
	writeTimeoutUsage = "give up (exit 1) when Firestore or the PostgreSQL lock database does not answer: bounds connecting " +
		"and acquiring the lock (to --lock-wait plus this time)"
	// backfillTimeoutUsage is writeTimeoutUsage with backfill's own read:
	// the other write commands have no --skip-complete.
	backfillTimeoutUsage = "give up (exit 1) when Firestore or the PostgreSQL lock database does not answer: bounds connecting, " +
		"the --skip-complete reads, and acquiring the lock (to --lock-wait plus this time)"
)

// registerTimeout adds --timeout (env SNAPWRITER_TIMEOUT) to a command.
// The root command's pre-run reads it into app.timeout.
func registerTimeout(fl *pflag.FlagSet, def time.Duration, usage string) {
	fl.Duration("timeout", def, usage)
}

// readTimeout sets a.timeout from the command's --timeout, if it has one;
// a timeout that is not positive is a usage error.
func (a *app) readTimeout(cmd *cobra.Command) error {
	if cmd.Flags().Lookup("timeout") == nil {
		return nil
	}
	d, err := cmd.Flags().GetDuration("timeout")
	if err != nil {
		return usagef("--timeout: %v", err)
	}
	if d <= 0 {
		return usagef("--timeout %s: want a positive duration such as 30s", d)
	}
	a.timeout = d
	return nil
}

// bound is the running command's --timeout.
func (a *app) bound() time.Duration {
	if a.timeout > 0 {
		return a.timeout
	}
	return fallbackTimeout
}

// waitError is what firestoreWait, postgresWait, lockWait and writeWait
// return for a store that did not answer: it names the store's endpoint.
type waitError = storeerr.UnreachableError

// within is --timeout as the bound that ran out.
func (a *app) within() string { return a.bound().String() + " (--timeout)" }

// firestoreWait names Firestore in err when err says it did not answer.
func (a *app) firestoreWait(err error) error {
	return storeerr.Wrap(err, waitError{Endpoint: a.firestoreEndpoint(), Within: a.within()})
}

// postgresWait names the PostgreSQL lock database dsn points at in err
// when err says it did not answer.
func (a *app) postgresWait(err error, dsn string) error {
	return storeerr.Wrap(err, waitError{Endpoint: pglock.Endpoint(dsn), Within: a.within()})
}

// lockWait names the lock store lf chooses in err when err says it did not
// answer.
func (a *app) lockWait(err error, lf lockFlags) error {
	return storeerr.Wrap(err, waitError{Endpoint: a.lockEndpoint(lf), Within: a.within()})
}

// writeWait names the store a write, repair or scheduled run waited on in
// vain, and what of the write went unanswered: acquiring the lock, the
// lock's renewals, the root document's transaction or the manifest's.
// Only runtime failures (exit 1) are touched. The --timeout wording is
// kept for what --timeout bounds — connecting (see newWriter), and each
// attempt to acquire the lock — and what ran out is named otherwise: a
// lease lost to unanswered renewals ran out of its --lock-ttl, however
// soon in the run, and the transactions of the write are bounded by the
// retry policy's attempt timeout. What went unanswered is the ending's
// (the table of endings decides which an error that matches several is),
// but for a lease lost: its renewals went unanswered whatever else ended
// the write — save a manifest not recorded, whose finish is what failed.
func (a *app) writeWait(err error, f writeFlags) error {
	if err == nil || exitCode(err) != exitError {
		return err
	}
	fs, lockStore := a.firestoreEndpoint(), a.lockEndpoint(f.lock)
	attempt := fmt.Sprintf("within %s an attempt", retry.DefaultPolicy().AttemptTimeout)
	w := waitError{Endpoint: fs, What: "the write", Within: "in time"}
	switch end := ending.Of(err).Err; {
	case end == snapshot.ErrTimeout:
		// The acquisition's own bound ran out: the command waited that long.
		w = waitError{Endpoint: lockStore, Within: fmt.Sprintf("--lock-wait %s + --contention-wait %s + --timeout %s", f.lockWait, f.contention, a.bound())}
	case end == snapshot.ErrManifestNotRecorded:
		w = waitError{Endpoint: fs, What: "the transaction recording the manifest", Within: attempt}
	case errors.Is(err, snapshot.ErrLockLost):
		w = waitError{Endpoint: lockStore, What: "the lock's renewals", Within: fmt.Sprintf("before the lock expired (--lock-ttl %s)", f.lockTTL)}
	case end == snapshot.ErrRootFailed:
		w = waitError{Endpoint: fs, What: "the root document's transaction", Within: attempt}
	case errors.As(err, new(*locking.Error)):
		// Acquiring the lock, each attempt within --timeout.
		w = waitError{Endpoint: lockStore, Within: a.within()}
	}
	return storeerr.Wrap(err, w)
}

// lockEndpoint names the lock store lf chooses.
func (a *app) lockEndpoint(lf lockFlags) string {
	if lf.backend == backendPostgres {
		return pglock.Endpoint(lf.dsn)
	}
	return a.firestoreEndpoint()
}

// firestoreEndpoint names the Firestore the commands talk to.
func (a *app) firestoreEndpoint() string {
	host, _ := a.lookupEnv("FIRESTORE_EMULATOR_HOST")
	return storeerr.FirestoreEndpoint(host, a.global.project, a.global.database)
}
