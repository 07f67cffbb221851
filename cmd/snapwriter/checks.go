package main

import (
	"errors"
	"fmt"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// checkCollection refuses a --collection that Firestore would reject only
// after the lock had created its own collections: it runs before any
// command touches Firestore.
func checkCollection(name string) error {
	if err := snapshot.CheckCollection(name); err != nil {
		return optionUsage(err)
	}
	return nil
}

// optionUsage is a usage error (exit 2) for an option the snapshot
// library refuses (*snapshot.OptionError), named by the flag that set it:
// the library holds the bounds, the CLI names its flags.
func optionUsage(err error) error {
	var oe *snapshot.OptionError
	if !errors.As(err, &oe) {
		return usageError{err}
	}
	shown := fmt.Sprint(oe.Value)
	if s, ok := oe.Value.(string); ok {
		shown = fmt.Sprintf("%q", s)
		if len(s) > 100 {
			shown = fmt.Sprintf("(%d bytes)", len(s))
		}
	}
	flag, ok := map[string]string{
		"WithCollection": "--collection", "WithBatchSize": "--batch-size", "WithConcurrency": "--concurrency",
		"WithLockTTL": "--lock-ttl", "WithLockWait": "--lock-wait", "WithGracePeriod": "--grace-period",
		"WithContentionWait": "--contention-wait", "WithRecordInterval": "--record-interval",
		"WithRequestTimeout": "--timeout",
	}[oe.Option]
	switch {
	case oe.Option == "WithRetryPolicy":
		return usagef("--max-retries: %s", oe.Reason)
	case ok:
		return usagef("%s %s: %s", flag, shown, oe.Reason)
	}
	return usageError{err}
}

// checkDate refuses a --date that disagrees with the input's own
// payload.metadata.dataAsOfDate, which would store a day's data under
// another day (backfill refuses a file whose name disagrees the same way).
// An input without a dataAsOfDate takes its id from --date.
func checkDate(snap *model.Snapshot, date string) error {
	if d := snap.Payload.Metadata.DataAsOfDate; date != "" && d != "" && d != date {
		return fmt.Errorf("%w: --date is %s but the input's $.payload.metadata.dataAsOfDate is %s: a snapshot is stored under the date of its data (drop --date, or correct the input)",
			model.ErrInvalid, date, d)
	}
	return nil
}

// checkDistrictFlag refuses a --district that cannot name a district, so
// that it never reaches Firestore as part of a document path.
func checkDistrictFlag(id string) error {
	if !model.ValidDistrictID(id) {
		return usagef("--district %q: invalid district id: want letters and digits only (^[A-Za-z0-9]+$, at most 64)", id)
	}
	return nil
}
