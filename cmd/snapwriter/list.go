package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/pglock"
	"github.com/snapwriter/snapwriter/snapshot"
)

func (a *app) listCommand() *cobra.Command {
	var asJSON bool
	var lf lockFlags
	cmd := &cobra.Command{
		Use:   "list [--json] [--lock-backend postgres --lock-dsn DSN]",
		Short: "List snapshots with their write state",
		Long: `List every snapshot, newest first: date, state, status, districts, failed
districts, pending districts and writer fence. FAILED counts the districts whose
write failed; PENDING, while the root says "writing" (states writing,
interrupted, unknown), those its writer has not reached yet — or, when it died,
never reached. The state is

  complete      every district written and status "success": what the
                application's readers take as the newest successful snapshot
  partial       written with failed districts: 'snapwriter repair' completes it
  unsuccessful  every district written, but the input's own status is
                "partial" or "failed" (its collection was): nothing to repair
  writing       the root's writeState is "writing" and a live lock holds the
                snapshot's key: a writer is at work
  interrupted   the root's writeState is "writing" but no live lock holds the
                key: the writer died; the root records what it had written,
                'snapwriter repair' completes it, or write it again
  unknown       the root's writeState is "writing" and it was written under the
                PostgreSQL lock, which this list was not given (--lock-backend
                postgres --lock-dsn), or records no lock backend at all
  deleting      a prune marked it and is deleting it, or was stopped midway:
                the application's readers skip it; 'snapwriter prune' run
                again finishes it

Roots of snapwriter versions before writeState said "writing" in their status;
they are read the same way.

Locks in Firestore are always checked; --lock-backend postgres --lock-dsn DSN
(or SNAPWRITER_LOCK_BACKEND and SNAPWRITER_LOCK_DSN) adds the PostgreSQL lock
database, only read. Below the table, the text output says what to do about
each snapshot that is not complete.`,
		Example: `  snapwriter list
  snapwriter list --json | jq '.[] | select(.state != "complete")'
  SNAPWRITER_LOCK_BACKEND=postgres SNAPWRITER_LOCK_DSN=postgres://locker@db/ops snapwriter list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.list(cmd.Context(), lf, asJSON) },
	}
	fl := cmd.Flags()
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	lf.register(fl)
	registerTimeout(fl, defaultReadTimeout, listTimeoutUsage)
	registerStoreFlags(fl)
	return cmd
}

func (a *app) list(ctx context.Context, lf lockFlags, asJSON bool) error {
	if err := lf.validate(); err != nil {
		return err
	}
	// --timeout bounds the whole command.
	ctx, cancel := context.WithTimeout(ctx, a.bound())
	defer cancel()
	client, err := a.client(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	var pg []locking.Backend
	if lf.backend == backendPostgres {
		// Only read: the tables are not created here.
		pgLock, closePG, err := a.openLocker(ctx, nil, lf, pglock.WithAutoCreateTables(false))
		if err != nil {
			return err
		}
		defer closePG()
		pg = append(pg, pgLock)
	}
	r, closeLocks, err := a.reader(client, pg...)
	if err != nil {
		return err
	}
	defer closeLocks()
	list, err := r.List(ctx)
	if err != nil {
		var lc *snapshot.LockCheckError
		if errors.As(err, &lc) && lc.Backend == backendPostgres {
			return a.postgresWait(err, lf.dsn)
		}
		return a.firestoreWait(err)
	}
	if asJSON {
		if list == nil {
			list = []snapshot.Summary{}
		}
		return printJSON(a.stdout, list)
	}
	return printList(a.stdout, list)
}

// printList prints the table, then the next step for each snapshot that
// is not complete.
func printList(w io.Writer, list []snapshot.Summary) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DATE\tSTATE\tSTATUS\tDISTRICTS\tFAILED\tPENDING\tFENCE")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", s.SnapshotID, s.State, s.Status, s.Districts,
			len(s.FailedDistricts), len(s.PendingDistricts), s.WriterFence)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	header := false
	for _, s := range list {
		hint := nextStep(s)
		if hint == "" {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\nnext steps (FILE: the snapshot's input, as given to write):")
			header = true
		}
		if _, err := fmt.Fprintf(w, "  %s %s: %s\n", s.SnapshotID, s.State, hint); err != nil {
			return err
		}
	}
	return nil
}

// nextStep is what an operator should do about a snapshot in state s, or
// "" for nothing.
func nextStep(s snapshot.Summary) string {
	repair := fmt.Sprintf("snapwriter repair --date %s --input FILE", s.SnapshotID)
	failed, pending := len(s.FailedDistricts), len(s.PendingDistricts)
	written := s.Districts - failed - pending
	switch s.State {
	case snapshot.StatePartial:
		return fmt.Sprintf("%s failed (%s); run `%s`", plural.N(failed, "district"), idList(s.FailedDistricts), repair)
	case snapshot.StateWriting:
		return fmt.Sprintf("a writer is at work: %d of %s written, %s, %d pending; list again once it has finished",
			written, plural.N(s.Districts, "district"), failedText(s.FailedDistricts), pending)
	case snapshot.StateInterrupted:
		// Pending: never reached, or written in its last moments and
		// not recorded (verify counts those; repair records them without
		// writing them again).
		return fmt.Sprintf("its writer died (no live lock) after writing %d of %s; %s, %d pending (never reached, or written but not recorded); run `%s`, or write it again",
			written, plural.N(s.Districts, "district"), failedText(s.FailedDistricts), pending, repair)
	case snapshot.StateUnsuccessful:
		return fmt.Sprintf("every district is written, but its input's status is %q: readers of the newest successful snapshot skip it; nothing to repair", s.Status)
	case snapshot.StateDeleting:
		return "a prune is deleting it, or was stopped midway (readers skip it); run `snapwriter prune` again (with any policy) to finish it"
	case snapshot.StateUnknown:
		switch s.LockBackend {
		case "":
			return `the root says "writing" but records no lock backend (not written by snapwriter); ask its writer, or write it again`
		case backendPostgres:
			return "written under the PostgreSQL lock, which was not checked; run `snapwriter list --lock-backend postgres --lock-dsn DSN` to tell a live write from a dead one"
		case backendFirestore:
			// Firestore locks are always checked: the root names a lock
			// key this snapwriter does not take.
			return fmt.Sprintf("written under a lock key this snapwriter does not take (key hash %s: another snapwriter version?), which cannot be checked; ask its writer, or write it again", s.LockKeyHash)
		}
		return fmt.Sprintf("written under the %q lock, which snapwriter cannot check; ask its writer, or write it again", s.LockBackend)
	}
	return ""
}

// failedText is "N failed", naming them (idList) when there are any.
func failedText(ids []string) string {
	if len(ids) == 0 {
		return "0 failed"
	}
	return fmt.Sprintf("%d failed (%s)", len(ids), idList(ids))
}
