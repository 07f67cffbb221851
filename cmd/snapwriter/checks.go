package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// registerTimezone adds --timezone (default UTC) to a command that reads
// "today", usage saying what of the command's it dates.
func registerTimezone(fl *pflag.FlagSet, tz *string, usage string) {
	fl.StringVar(tz, "timezone", "UTC", usage)
}

// loadTimezone is the location --timezone names, or the usage error.
func loadTimezone(name string) (*time.Location, error) {
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, valueUsage("--timezone", name, "want an IANA time zone such as Europe/Berlin")
	}
	return loc, nil
}

// checkCollection refuses a --collection that Firestore would reject only
// after the lock had created its own collections: it runs before any
// command touches Firestore.
func checkCollection(name string) error {
	if err := snapshot.CheckCollection(name); err != nil {
		return usage(err)
	}
	return nil
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
