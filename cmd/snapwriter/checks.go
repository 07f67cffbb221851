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
	value := oe.Value
	if s, ok := value.(string); ok && len(s) > 100 {
		value = longString(len(s))
	}
	if oe.Setting == snapshot.SettingRetryPolicy {
		return usagef("--max-retries: %s", oe.Reason)
	}
	if flag, ok := settingFlags[oe.Setting]; ok {
		return valueUsage(flag, value, oe.Reason)
	}
	return usageError{err}
}

// settingFlags are the flags that set the writer's settings; the
// environment's SNAPWRITER_<FLAG> follows from the flag (applyEnv). The
// retry policy is --max-retries, refused in words of its own.
var settingFlags = map[snapshot.Setting]string{
	snapshot.SettingCollection: "--collection", snapshot.SettingBatchSize: "--batch-size",
	snapshot.SettingConcurrency: "--concurrency", snapshot.SettingLockTTL: "--lock-ttl",
	snapshot.SettingLockWait: "--lock-wait", snapshot.SettingGracePeriod: "--grace-period",
	snapshot.SettingContentionWait: "--contention-wait", snapshot.SettingRecordInterval: "--record-interval",
	snapshot.SettingRequestTimeout: "--timeout",
}

// longString stands in optionUsage's message for a string over 100 bytes
// (a collection name refused for its length, say), which would drown the
// reason: it shows only the length.
type longString int

func (n longString) String() string { return fmt.Sprintf("(%d bytes)", int(n)) }

// valueUsage is the usage error for v, the value of flag, that a library
// refused for reason: a string is quoted, a nil value (none given) left
// out, any other shown as %v. optionUsage, loadtest's and schedule's
// refusals all read alike through it.
func valueUsage(flag string, v any, reason string) error {
	switch v := v.(type) {
	case nil:
		return usagef("%s: %s", flag, reason)
	case string:
		return usagef("%s %q: %s", flag, v, reason)
	}
	return usagef("%s %v: %s", flag, v, reason)
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
