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

// Defaults of --timeout, the bound on a read command (get, list, verify,
// diff, lock status, lock release) as a whole. The write commands (write,
// repair, backfill, schedule, prune, loadtest) take --request-timeout
// instead, a bound on each request, defaulting to
// snapshot.DefaultRequestTimeout.
const (
	// defaultReadTimeout bounds get and list, the whole command.
	defaultReadTimeout = 60 * time.Second
	// defaultLockCommandTimeout bounds lock status and lock release, the
	// whole command.
	defaultLockCommandTimeout = 30 * time.Second
	// fallbackTimeout bounds waits of a command without either flag.
	fallbackTimeout = 30 * time.Second
)

// The names of the two bounds: --timeout bounds a whole read command,
// --request-timeout each request of a write command, which keeps
// --timeout as its deprecated name.
const (
	timeoutFlag        = "timeout"
	requestTimeoutFlag = "request-timeout"
)

// Usage texts of --timeout.
const (
	getTimeoutUsage  = "give up (exit 1) when Firestore has not answered within this time; bounds the whole command"
	listTimeoutUsage = "give up (exit 1) when Firestore or the PostgreSQL lock database has not answered within this time; " +
		"bounds the whole command"
	lockTimeoutUsage = "give up (exit 1) when the lock store has not answered within this time; bounds the whole command"
	// inputTimeoutUsage: diff and verify read an --input in Cloud Storage too.
	inputTimeoutUsage = "give up (exit 1) when Firestore (or Cloud Storage, for a gs:// --input) has not answered within this time; " +
		"bounds the whole command"
)

// Usage texts of --request-timeout: what each write command sends a store
// that one request may take. Each starts with requestTimeoutConnect, and
// those of the commands that write a snapshot with requestTimeoutUsage.
const (
	requestTimeoutConnect = "give up (exit 1) when a store does not answer one request within this time; bounds each request, not the command: " +
		"connecting to Firestore (and to the PostgreSQL lock database with --lock-backend postgres)"
	requestTimeoutUsage         = requestTimeoutConnect + ", each attempt to acquire the lock (so a lock is waited for to --lock-wait plus this time)"
	writeRequestTimeoutUsage    = requestTimeoutUsage + ", each read of a gs:// --input (this long without progress), --gate's reads of what is stored, and --dry-run's reads"
	repairRequestTimeoutUsage   = requestTimeoutUsage + ", each read of a gs:// --input (this long without progress), and --dry-run's reads"
	backfillRequestTimeoutUsage = requestTimeoutUsage + ", each read of a gs:// --input-dir (this long without progress), " +
		"each --skip-complete read of what is complete, --gate's reads of what is stored, and --dry-run's reads"
	scheduleRequestTimeoutUsage = requestTimeoutUsage + ", each read of a gs:// --input-dir (this long without progress; --http-timeout bounds an --input-url download), " +
		"and --gate's reads of what is stored"
	pruneRequestTimeoutUsage    = requestTimeoutConnect + ", the listing of the snapshots, and each attempt to acquire a date's lock"
	loadtestRequestTimeoutUsage = requestTimeoutConnect + ", and each attempt to acquire a round's snapshot lock (so it is waited for to --lock-wait plus this time)"
)

// registerTimeout adds --timeout (env SNAPWRITER_TIMEOUT) to a read
// command: it bounds the whole command. The root command's pre-run reads
// it into app.timeout.
func registerTimeout(fl *pflag.FlagSet, def time.Duration, usage string) {
	fl.Duration(timeoutFlag, def, usage)
}

// registerRequestTimeout adds --request-timeout (env
// SNAPWRITER_REQUEST_TIMEOUT) to a write command, with usage saying what
// it bounds there, and --timeout (SNAPWRITER_TIMEOUT), its name before
// #44, as a hidden deprecated alias of it.
func registerRequestTimeout(fl *pflag.FlagSet, usage string) {
	fl.Duration(requestTimeoutFlag, snapshot.DefaultRequestTimeout, usage)
	fl.Duration(timeoutFlag, snapshot.DefaultRequestTimeout, "deprecated: use --request-timeout")
	deprecateAlias(fl, timeoutFlag, requestTimeoutFlag, "the same bound on each request to a store; --timeout bounds a whole read command")
}

// readTimeout sets a.timeout from the command's --request-timeout or
// --timeout, whichever it has (resolveAliases has given --request-timeout
// the value of its deprecated name), and a.timeoutFlag to the name the
// value came by; a bound that is not positive is a usage error.
func (a *app) readTimeout(cmd *cobra.Command) error {
	fl := cmd.Flags()
	name := requestTimeoutFlag
	if fl.Lookup(name) == nil {
		name = timeoutFlag
		if fl.Lookup(name) == nil {
			return nil
		}
	}
	given := givenAs(fl, name)
	d, err := fl.GetDuration(name)
	if err != nil {
		return usagef("%s: %v", given, err)
	}
	if d <= 0 {
		return usagef("%s %s: want a positive duration such as 30s", given, d)
	}
	a.timeout, a.timeoutFlag = d, given
	return nil
}

// bound is the running command's --timeout or --request-timeout.
func (a *app) bound() time.Duration {
	if a.timeout > 0 {
		return a.timeout
	}
	return fallbackTimeout
}

// waitError is what firestoreWait, postgresWait, lockWait and writeWait
// return for a store that did not answer: it names the store's endpoint.
type waitError = storeerr.UnreachableError

// within is --timeout or --request-timeout as the bound that ran out,
// named as it was given: "30s (--request-timeout)".
func (a *app) within() string {
	if a.timeoutFlag == "" {
		return a.bound().String()
	}
	return a.bound().String() + " (" + a.timeoutFlag + ")"
}

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
// Only runtime failures (exit 1) are touched. The --request-timeout
// wording (or --timeout, its deprecated name, when that gave it) is kept
// for what it bounds — connecting (see newWriter), and each attempt to
// acquire the lock — and what ran out is named otherwise: a
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
		w = waitError{Endpoint: lockStore, Within: fmt.Sprintf("--lock-wait %s + --contention-wait %s + %s %s", f.lockWait, f.contention, a.timeoutFlag, a.bound())}
	case end == snapshot.ErrManifestNotRecorded:
		w = waitError{Endpoint: fs, What: "the transaction recording the manifest", Within: attempt}
	case errors.Is(err, snapshot.ErrLockLost):
		w = waitError{Endpoint: lockStore, What: "the lock's renewals", Within: fmt.Sprintf("before the lock expired (--lock-ttl %s)", f.lockTTL)}
	case end == snapshot.ErrRootFailed:
		w = waitError{Endpoint: fs, What: "the root document's transaction", Within: attempt}
	case errors.As(err, new(*locking.Error)):
		// Acquiring the lock, each attempt within --request-timeout.
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
