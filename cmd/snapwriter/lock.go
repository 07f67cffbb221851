package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"cloud.google.com/go/firestore"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

func (a *app) lockCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Inspect or force-release snapshot locks (operators)",
		Long: `Inspect or force-release the fenced locks writers take. They live in the
Firestore collections "locks" and "fence_counters", or with --lock-backend
postgres in the tables "syncguard_locks" and "syncguard_fence_counters", in the
layout SyncGuard clients share.

A snapshot write holds a key that names the snapshot's document: with the
Firestore lock "snapshot:<database>:<collection>:<YYYY-MM-DD>", with the
PostgreSQL lock, which several projects may share,
"snapshot:<project>:<database>:<collection>:<YYYY-MM-DD>" — for example
"snapshot:(default):snapshots:2026-11-20". A ":", "%" or any byte other than
A-Z a-z 0-9 - . _ ~ ( ) in a name is written %XX, and a name whose written
form is over 120 bytes becomes "#" and 32 hex digits of its SHA-256.
'lock status --date D' computes the key for the project, database, collection
and lock backend it is given.
Writers of snapwriter versions before these keys held "snapshot:<YYYY-MM-DD>".

Keys and lockIds are never logged; logs and the default output name them by
hash (the first 24 hex characters of their SHA-256).`,
		Example: `  snapwriter lock status --date 2026-11-20
  snapwriter lock status --key 'snapshot:(default):snapshots:2026-11-20'
  snapwriter lock release --lock-id 3q2-7wAAAAAAAAAAAAAAAA
  SNAPWRITER_LOCK_DSN=postgres://locker@db/ops snapwriter lock status --date 2026-11-20 --lock-backend postgres`,
		Args: cobra.NoArgs,
		// Runnable, so that `lock bogus` is an unknown command (exit 2)
		// rather than help with exit 0.
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.lockStatusCommand(), a.lockReleaseCommand())
	return cmd
}

func (a *app) lockStatusCommand() *cobra.Command {
	var f lockStatusFlags
	cmd := &cobra.Command{
		Use:   "status --key K | --date D [--json] [--raw]",
		Short: "Describe the live lock on a key, or say it is not locked",
		Long: `Describe the live lock on --key: key hash, lockId hash, fence, acquired and
expiry times, and the remaining time to live. A lock stays live until 1 s after
its expiry (the clock-skew tolerance every client shares), so "remaining" is 0
during that last second.

--date D instead of --key: the lock a write of the snapshot of D holds, in
--project (or the detected one), --database and --collection, on --lock-backend;
the output also shows that key.

--raw also prints the raw key and lockId as stored. The lockId is the capability
to release the lock: use --raw for debugging only, and do not paste its output
where others can read it.

Exit status: 0 whether the key is locked or not (read "locked" in the --json
output, or the first line of the text output); 2 for an invalid key or --date
(nothing read); 1 when the lock store (Firestore or PostgreSQL) fails or does not answer
within --timeout (default 30 s, for the whole command).`,
		Example: `  snapwriter lock status --date 2026-11-20
  snapwriter --collection daily lock status --date 2026-11-20 --json | jq .locked
  snapwriter lock status --key 'snapshot:(default):snapshots:2026-11-20'
  SNAPWRITER_KEY=report:2026-11 snapwriter lock status --raw`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.lockStatus(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.key, "key", "", `lock key, for example "snapshot:(default):snapshots:2026-11-20" (this or --date is required)`)
	fl.StringVar(&f.date, "date", "", "snapshot date (YYYY-MM-DD): the lock of that snapshot in --project, --database and --collection, instead of --key")
	fl.BoolVar(&f.asJSON, "json", false, "print JSON")
	fl.BoolVar(&f.raw, "raw", false, "also print the raw key and lockId (debugging only: the lockId can release the lock)")
	f.lock.register(fl)
	registerTimeout(fl, defaultLockCommandTimeout, lockTimeoutUsage)
	registerStoreFlags(fl)
	cmd.MarkFlagsOneRequired("key", "date")
	cmd.MarkFlagsMutuallyExclusive("key", "date")
	return cmd
}

func (a *app) lockReleaseCommand() *cobra.Command {
	var r lockReleaseFlags
	cmd := &cobra.Command{
		Use:   "release --date D | --key K | --lock-id ID [--yes] [--json]",
		Short: "Force-release a snapshot's live lock, or the one a lockId names",
		Long: `Release a live lock as its holder would: the lock document is deleted only if
it is live and still carries the lockId that was read, so a lock that has since
passed to another writer is never touched. The fence counter stays, so the next
holder gets a larger fence and a writer that still believes it holds the lock
is fenced out of the snapshot (exit 5): its data never overwrites a newer
writer's.

--date D: the live lock of the snapshot of D (the key 'lock status --date D'
shows, for --project, --database, --collection and --lock-backend); --key K: the
live lock on K. The command shows the lock it is about to release (key hash,
lockId hash, fence, acquired and expiry times; no holder is recorded) and, when
stdin is a terminal, asks to confirm: anything but "y" or "yes" releases
nothing. Without a terminal it needs --yes (else exit 2, nothing read).

--lock-id ID: the lock that lockId names (lock status --raw prints it); "-"
reads it from the first line of stdin, which keeps it out of the process list
and shell history. No confirmation: the lockId is the capability.

Releasing the lock of a live writer lets a second writer in; the fence keeps the
data safe, and the first writer ends fenced out. For a crashed writer, waiting
for the lock to expire (the writer's write --lock-ttl, 30 s by default) is the safest.

Exit status: 0 released; 1 nothing released: no live lock on the date or key,
the confirmation was declined, no live lock carries the lockId (it expired, was
released already, or never existed; the message says which), or the lock store
failed or did not answer within --timeout (default 30 s, for the lookup and the
release each); 2 for a malformed lockId, key or date, or --date/--key without a
terminal and without --yes (nothing read or changed).`,
		Example: `  snapwriter lock release --date 2026-11-20
  snapwriter lock release --date 2026-11-20 --yes --json
  snapwriter lock release --date 2026-11-20 --lock-backend postgres --yes
  printf '%s\n' "$LOCK_ID" | snapwriter lock release --lock-id -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if r.lockID != "" {
				if r.yes {
					return usagef("--yes is for --date and --key: --lock-id asks no question")
				}
				return a.lockRelease(cmd.Context(), r.lock, r.lockID, r.asJSON)
			}
			return a.lockReleaseKey(cmd.Context(), r)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&r.lockID, "lock-id", "", `lockId of the lock to release, or "-" to read it from stdin`)
	fl.StringVar(&r.date, "date", "", "snapshot date (YYYY-MM-DD): release the live lock of that snapshot in --project, --database and --collection")
	fl.StringVar(&r.key, "key", "", "lock key: release the live lock on it")
	fl.BoolVar(&r.yes, "yes", false, "release without asking (--date, --key); needed when stdin is not a terminal")
	fl.BoolVar(&r.asJSON, "json", false, "print JSON")
	r.lock.register(fl)
	registerTimeout(fl, defaultLockCommandTimeout, lockTimeoutUsage)
	// --collection is --date's: the key of a snapshot's lock names its
	// collection (a lockId names its lock whatever the collection).
	registerStoreFlags(fl)
	cmd.MarkFlagsOneRequired("lock-id", "date", "key")
	cmd.MarkFlagsMutuallyExclusive("lock-id", "date", "key")
	return cmd
}

// snapshotLockKey returns the key a write of the snapshot of date holds on
// the lock backend named backend, computed as the writer computes it: for
// the project and database client addresses (--project, or the project
// detected) and --collection.
func (a *app) snapshotLockKey(client *firestore.Client, backend, date string) (string, error) {
	scope, err := snapshot.ScopeOf(client, a.global.collection)
	if err == nil {
		var key string
		if key, err = scope.LockKey(backend, date); err == nil {
			return key, nil
		}
	}
	return "", usageError{err: fmt.Errorf("the lock key of snapshot %s: %w", date, err)}
}

// lockStatusFlags are the flags of lock status.
type lockStatusFlags struct {
	key, date   string
	asJSON, raw bool
	lock        lockFlags
}

// checkLockTarget validates --key or --date (one is set) and the lock
// flags, before anything is read: an invalid one reads nothing.
func checkLockTarget(key, date string, lf lockFlags) error {
	if date == "" {
		if _, err := locking.NormalizeAndValidateKey(key); err != nil {
			return usage(err)
		}
	} else if !model.ValidDate(date) {
		return usagef("--date %q: want a real YYYY-MM-DD date", date)
	}
	return lf.validate()
}

// lockTarget opens the lock backend of lf and names the key --key or
// --date (checked by checkLockTarget) gives: the key as given or computed,
// and normalised. One Firestore client serves both the key's scope
// (--date) and the Firestore lock backend: a read and a release need no
// connection of their own, unlike a writer's lease (writeLocker). The func
// returned closes both.
func (a *app) lockTarget(ctx context.Context, key, date string, lf lockFlags) (b locking.Backend, rawKey, nkey string, closeAll func(), err error) {
	var client *firestore.Client
	closeClient := func() {}
	if date != "" || lf.backend == backendFirestore {
		if client, err = a.client(ctx); err != nil {
			return nil, "", "", nil, err
		}
		closeClient = func() { _ = client.Close() }
	}
	if date != "" {
		if key, err = a.snapshotLockKey(client, lf.backend, date); err != nil {
			closeClient()
			return nil, "", "", nil, err
		}
	}
	if nkey, err = locking.NormalizeAndValidateKey(key); err != nil {
		closeClient()
		return nil, "", "", nil, usage(err)
	}
	b, closeLocker, err := a.openLocker(ctx, client, lf)
	if err != nil {
		closeClient()
		return nil, "", "", nil, err
	}
	return b, key, nkey, func() { closeLocker(); closeClient() }, nil
}

func (a *app) lockStatus(ctx context.Context, f lockStatusFlags) error {
	date, raw, lf := f.date, f.raw, f.lock
	if err := checkLockTarget(f.key, date, lf); err != nil {
		return err
	}
	// --timeout bounds the whole command.
	ctx, cancel := context.WithTimeout(ctx, a.bound())
	defer cancel()
	b, key, nkey, closeAll, err := a.lockTarget(ctx, f.key, date, lf)
	if err != nil {
		return err
	}
	defer closeAll()
	get := locking.GetStatus
	if raw {
		get = locking.GetStatusRaw
	}
	st, err := get(ctx, b, key)
	if errors.Is(err, locking.ErrInvalidArgument) {
		return usage(err)
	}
	if err != nil {
		return a.lockWait(err, lf)
	}
	a.log.Debug("lock status", zap.String("keyHash", st.KeyHash), zap.Bool("locked", st.Locked))
	if date != "" && !(raw && st.Locked) {
		st.Key = nkey // computed from the operator's own flags: nothing to hide
	}
	if f.asJSON {
		return printJSON(a.stdout, st)
	}
	if !st.Locked {
		fmt.Fprintf(a.stdout, "not locked (key hash %s)\n", st.KeyHash)
		if date != "" {
			fmt.Fprintf(a.stdout, "  key: %s\n", nkey)
		}
		return nil
	}
	fmt.Fprintln(a.stdout, "locked")
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	if date != "" && !raw {
		fmt.Fprintf(tw, "  key:\t%s\n", nkey)
	}
	fmt.Fprintf(tw, "  key hash:\t%s\n  lockId hash:\t%s\n  fence:\t%s\n", st.KeyHash, st.LockIDHash, st.Fence)
	fmt.Fprintf(tw, "  acquired at:\t%s\n  expires at:\t%s\n  remaining:\t%s\n", *st.AcquiredAt, *st.ExpiresAt, st.Remaining())
	if raw {
		fmt.Fprintf(tw, "  key (raw):\t%q\n  lockId (raw):\t%s\n", st.Key, st.LockID)
	}
	return tw.Flush()
}

func (a *app) lockRelease(ctx context.Context, lf lockFlags, lockID string, asJSON bool) error {
	if lockID == "-" {
		line, err := bufio.NewReader(a.stdin).ReadString('\n')
		if err != nil && line == "" {
			return usagef("--lock-id -: no lockId on stdin")
		}
		lockID = strings.TrimSpace(line)
	}
	// Validate before connecting: a malformed lockId touches nothing. The
	// message never quotes the lockId.
	if err := locking.ValidateLockID(lockID); err != nil {
		return usagef("--lock-id: %v", err)
	}
	if err := lf.validate(); err != nil {
		return err
	}
	// --timeout bounds the whole command.
	ctx, cancel := context.WithTimeout(ctx, a.bound())
	defer cancel()
	b, closeLocker, err := a.writeLocker(ctx, lf)
	if err != nil {
		return err
	}
	defer closeLocker()
	r, err := locking.ForceRelease(ctx, b, lockID)
	return a.released(r, err, lf, asJSON)
}

// released reports a ForceRelease: logs it by hashes, prints it, and
// returns the command's error (exit 1 when nothing was released).
func (a *app) released(r locking.ReleaseResult, err error, lf lockFlags, asJSON bool) error {
	if errors.Is(err, locking.ErrInvalidArgument) {
		return usage(err)
	}
	if err != nil && !errors.Is(err, locking.ErrNotReleased) {
		return a.lockWait(err, lf)
	}
	fields := []zap.Field{zap.String("lockIdHash", r.LockIDHash)}
	if r.KeyHash != "" {
		fields = append(fields, zap.String("keyHash", r.KeyHash), zap.String("fence", r.Fence))
	}
	if r.Released {
		a.log.Info("lock force-released", fields...)
	} else {
		a.log.Warn("lock not released", append(fields, zap.String("reason", string(r.Reason)))...)
	}
	switch {
	case asJSON:
		if err := printJSON(a.stdout, r); err != nil {
			return err
		}
	case r.KeyHash != "":
		fmt.Fprintf(a.stdout, "released lock %s (key hash %s, fence %s)\n", r.LockIDHash, r.KeyHash, r.Fence)
	case r.Released:
		fmt.Fprintf(a.stdout, "released lock %s\n", r.LockIDHash)
	}
	if r.Released {
		return nil
	}
	why := "no lock carries this lockId (already released, taken over, or never existed)"
	if r.Reason == locking.ReasonExpired {
		why = "the lock this lockId names has expired (its key is free to acquire)"
	}
	return fmt.Errorf("nothing released: lock %s is not held: %s", r.LockIDHash, why)
}

// lockReleaseFlags are the flags of lock release.
type lockReleaseFlags struct {
	lockID, date, key string
	yes, asJSON       bool
	lock              lockFlags
}

// errNotConfirmed: the operator did not confirm a release.
var errNotConfirmed = errors.New("nothing released: not confirmed")

// lockReleaseKey releases the live lock of --date or --key: it reads the
// lock (its lockId too, never shown or logged), shows it, asks to confirm
// at a terminal unless --yes, and releases it by the lockId read, which
// changes nothing if the lock has passed to another writer since.
func (a *app) lockReleaseKey(ctx context.Context, f lockReleaseFlags) error {
	if err := checkLockTarget(f.key, f.date, f.lock); err != nil {
		return err
	}
	if !f.yes && !a.stdinTerminal {
		return usagef("lock release --%s: stdin is not a terminal to confirm on; pass --yes to release without asking", map[bool]string{true: "date", false: "key"}[f.date != ""])
	}
	// --timeout bounds the lookup, and the release after the question,
	// each: a person's answer takes its own time.
	lctx, cancel := context.WithTimeout(ctx, a.bound())
	defer cancel()
	b, _, nkey, closeAll, err := a.lockTarget(lctx, f.key, f.date, f.lock)
	if err != nil {
		return err
	}
	defer closeAll()
	st, err := locking.GetStatusRaw(lctx, b, nkey)
	if errors.Is(err, locking.ErrInvalidArgument) {
		return usage(err)
	}
	if err != nil {
		return a.lockWait(err, f.lock)
	}
	// Messages and stderr (a log, on Cloud Run) name the key by hash only.
	what := "the key"
	if f.date != "" {
		what = "snapshot " + f.date
	}
	if !st.Locked {
		a.log.Info("lock not released: not locked", zap.String("keyHash", st.KeyHash))
		return fmt.Errorf("nothing released: %s has no live lock (key hash %s)", what, st.KeyHash)
	}
	// What is about to be released: on stdout, with the key the
	// operator's flags gave; beside the JSON (which says what was
	// released) on stderr, by hashes only.
	show := a.stdout
	if f.asJSON {
		show = a.stderr
	}
	fmt.Fprintf(show, "the live lock of %s:\n", what)
	tw := tabwriter.NewWriter(show, 0, 4, 2, ' ', 0)
	if !f.asJSON {
		fmt.Fprintf(tw, "  key:\t%s\n", nkey)
	}
	fmt.Fprintf(tw, "  key hash:\t%s\n  lockId hash:\t%s\n  fence:\t%s\n", st.KeyHash, st.LockIDHash, st.Fence)
	fmt.Fprintf(tw, "  acquired at:\t%s\n  expires at:\t%s\n  remaining:\t%s\n", *st.AcquiredAt, *st.ExpiresAt, st.Remaining())
	_ = tw.Flush()
	if !f.yes {
		ok, err := a.confirm(ctx, "release it? its writer, if alive, ends fenced out [y/N] ")
		if err != nil {
			return err
		}
		if !ok {
			a.log.Info("lock not released: not confirmed", zap.String("keyHash", st.KeyHash), zap.String("lockIdHash", st.LockIDHash))
			return errNotConfirmed
		}
	}
	rctx, rcancel := context.WithTimeout(ctx, a.bound())
	defer rcancel()
	r, err := locking.ForceRelease(rctx, b, st.LockID)
	return a.released(r, err, f.lock, f.asJSON)
}

// confirm asks question on stderr and reads the answer from stdin: true
// for "y" or "yes" (any case), false for anything else, the end of stdin
// included. A signal ends the wait (ctx).
func (a *app) confirm(ctx context.Context, question string) (bool, error) {
	fmt.Fprint(a.stderr, question)
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(a.stdin).ReadString('\n')
		answer <- line
	}()
	select {
	case line := <-answer:
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
			return true, nil
		}
		return false, nil
	case <-ctx.Done():
		fmt.Fprintln(a.stderr)
		return false, fmt.Errorf("%w: %w", errNotConfirmed, context.Cause(ctx))
	}
}
