package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
	writeTimeoutUsage = "give up (exit 1) when Firestore or the PostgreSQL lock database does not answer: bounds connecting, " +
		"backfill's --skip-complete reads, and acquiring the lock (to --lock-wait plus this time)"
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
		return usagef("--timeout %s (or SNAPWRITER_TIMEOUT): want a positive duration such as 30s", d)
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

// waitError says that a store (Firestore, the PostgreSQL lock database)
// did not answer in time or could not be reached. Its message names the
// store by endpoint, never by credentials, what went unanswered when that
// is not what the command as a whole was doing, and the bound that ran
// out; the error it wraps says what the command was doing.
type waitError struct {
	store string // "the Firestore emulator at 127.0.0.1:8080"
	// what went unanswered ("the lock's renewals"); "" when the wrapped
	// error says it.
	what string
	// within is the bound that ran out: "2s (--timeout)", or with what,
	// a phrase ("before the lock expired (--lock-ttl 5s)"); "" when no
	// bound ran out (the store refused the connection).
	within string
	err    error
}

// Error names the store and the bound, then says what was being done.
func (e *waitError) Error() string { return e.short() + ": " + e.err.Error() }

// short is the message without the wrapped error.
func (e *waitError) short() string {
	switch {
	case e.within == "":
		return e.store + " is unreachable"
	case e.what != "":
		return fmt.Sprintf("no answer from %s to %s %s", e.store, e.what, e.within)
	}
	return fmt.Sprintf("no answer from %s within %s", e.store, e.within)
}

// Unwrap returns the error of what was being done.
func (e *waitError) Unwrap() error { return e.err }

// timedOut reports whether err means a store did not answer in time.
func timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, snapshot.ErrTimeout) ||
		errors.Is(err, locking.ErrNetworkTimeout) || status.Code(err) == codes.DeadlineExceeded
}

// unreachable reports whether err means a store did not answer in time or
// refused the connection. A cancellation (a signal) is neither.
func unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	return timedOut(err) || errors.Is(err, locking.ErrServiceUnavailable) || status.Code(err) == codes.Unavailable
}

// named wraps err, when it says store did not answer, in a waitError
// naming store; within describes the bound that ran out.
func named(err error, store, within string) error {
	return namedWhat(err, store, "", within)
}

// namedWhat is named for an error where what went unanswered, within the
// bound the phrase within describes, is not what err says first.
func namedWhat(err error, store, what, within string) error {
	if !unreachable(err) || errors.As(err, new(*waitError)) {
		return err
	}
	if !timedOut(err) {
		what, within = "", ""
	}
	return &waitError{store: store, what: what, within: within, err: err}
}

// firestoreWait names Firestore in err when err says it did not answer.
func (a *app) firestoreWait(err error) error {
	return named(err, a.firestoreEndpoint(), a.bound().String()+" (--timeout)")
}

// postgresWait names the PostgreSQL lock database dsn points at in err
// when err says it did not answer.
func (a *app) postgresWait(err error, dsn string) error {
	return named(err, pglock.Endpoint(dsn), a.bound().String()+" (--timeout)")
}

// lockWait names the lock store lf chooses in err when err says it did not
// answer.
func (a *app) lockWait(err error, lf lockFlags) error {
	if lf.backend == backendPostgres {
		return a.postgresWait(err, lf.dsn)
	}
	return a.firestoreWait(err)
}

// writeWait names the store a write, repair or scheduled run waited on in
// vain, and what of the write went unanswered: acquiring the lock, the
// lock's renewals, the root document's transaction or the manifest's.
// Only runtime failures (exit 1) are touched. The --timeout wording is
// kept for what --timeout bounds — connecting (see newWriter), and each
// attempt to acquire the lock — and what ran out is named otherwise: a
// lease lost to unanswered renewals ran out of its --lock-ttl, however
// soon in the run, and the transactions of the write are bounded by the
// retry policy's attempt timeout.
func (a *app) writeWait(err error, f writeFlags) error {
	if err == nil || exitCode(err) != exitError {
		return err
	}
	lockStore := a.firestoreEndpoint()
	if f.lock.backend == backendPostgres {
		lockStore = pglock.Endpoint(f.lock.dsn)
	}
	attempt := fmt.Sprintf("within %s an attempt", retry.DefaultPolicy().AttemptTimeout)
	switch {
	case errors.Is(err, snapshot.ErrTimeout):
		// The acquisition's own bound ran out: the command waited that long.
		return named(err, lockStore, fmt.Sprintf("--lock-wait %s + --contention-wait %s + --timeout %s", f.lockWait, f.contention, a.bound()))
	case errors.Is(err, snapshot.ErrManifestNotRecorded):
		// Even with the lock lost too: the finish is what failed.
		return namedWhat(err, a.firestoreEndpoint(), "the transaction recording the manifest", attempt)
	case errors.Is(err, snapshot.ErrLockLost):
		return namedWhat(err, lockStore, "the lock's renewals", fmt.Sprintf("before the lock expired (--lock-ttl %s)", f.lockTTL))
	case errors.Is(err, snapshot.ErrRootFailed):
		return namedWhat(err, a.firestoreEndpoint(), "the root document's transaction", attempt)
	case errors.As(err, new(*locking.Error)):
		// Acquiring the lock, each attempt within --timeout.
		return named(err, lockStore, a.bound().String()+" (--timeout)")
	}
	return namedWhat(err, a.firestoreEndpoint(), "the write", "in time")
}

// firestoreEndpoint names the Firestore the commands talk to: the
// emulator FIRESTORE_EMULATOR_HOST names, or the production endpoint with
// the database (and project, when given).
func (a *app) firestoreEndpoint() string {
	if h, ok := a.lookupEnv("FIRESTORE_EMULATOR_HOST"); ok && h != "" {
		return "the Firestore emulator at " + h
	}
	s := "Firestore at firestore.googleapis.com:443 (database " + a.global.database
	if a.global.project != "" {
		s += ", project " + a.global.project
	}
	return s + ")"
}
