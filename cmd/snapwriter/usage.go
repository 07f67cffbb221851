package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/snapwriter/snapwriter/backfill"
	"github.com/snapwriter/snapwriter/loadtest"
	"github.com/snapwriter/snapwriter/schedule"
	"github.com/snapwriter/snapwriter/snapshot"
)

// usageError is a bad command line — a flag, a value, an argument, an
// environment variable: exit 2, nothing written. help marks an error in
// the command line's form (an unknown flag or command, a value of the
// wrong type), which earns a pointer to --help.
type usageError struct {
	err  error
	help bool
}

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{err: fmt.Errorf(format, args...)} }

// needsHelp reports whether err is a usage error that earns the pointer
// to --help.
func needsHelp(err error) bool {
	var u usageError
	return errors.As(err, &u) && u.help
}

// usage is err, a library's refusal of what the command line gave it, as
// the usage error that names the flag: the libraries name their settings
// and fields, the CLI its flags, in the tables below. Any other err is a
// usage error as it is.
func usage(err error) error {
	var (
		oe *snapshot.OptionError
		re *backfill.RangeError
		ee *backfill.EnvError
		lc *loadtest.ConfigError
		sc *schedule.ConfigError
	)
	switch {
	case errors.As(err, &oe):
		if oe.Setting == snapshot.SettingRetryPolicy {
			return usagef("--max-retries: %s", oe.Reason)
		}
		if flag, ok := settingFlags[oe.Setting]; ok {
			value := oe.Value
			if s, ok := value.(string); ok && len(s) > 100 {
				value = longString(len(s))
			}
			return valueUsage(flag, value, oe.Reason)
		}
	case errors.As(err, &re) && re.End != "":
		return usagef("--%s %q: want a real YYYY-MM-DD date", re.End, re.Date)
	case errors.As(err, &re):
		return usagef("--from %s is after --to %s", re.From, re.To)
	case errors.As(err, &ee):
		return usagef("%v (or set %s)", err, taskEnvFlags[ee.Name])
	case errors.As(err, &lc):
		// loadtest's flags are its Config's fields, lower-cased.
		flag := "--" + strings.ToLower(lc.Field)
		if lc.Field == "Collection" && lc.Value == nil {
			return usagef("%s is required: name a scratch collection (loadtest writes and deletes snapshots there)", flag)
		}
		return valueUsage(flag, lc.Value, lc.Reason)
	case errors.As(err, &sc):
		if sc.Value == nil { // Field "Input"
			return usagef("give exactly one of --input-dir and --input-url")
		}
		return valueUsage(scheduleFlags[sc.Field], sc.Value, sc.Reason)
	}
	return usageError{err: err}
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

// taskEnvFlags are the flags that stand in for Cloud Run's task variables.
var taskEnvFlags = map[string]string{backfill.TaskIndexEnv: "--task-index", backfill.TaskCountEnv: "--task-count"}

// scheduleFlags are the flags that set schedule.Config's fields.
var scheduleFlags = map[string]string{"Cron": "--cron", "Timezone": "--timezone", "InputDir": "--input-dir",
	"InputURL": "--input-url", "DateOffset": "--date-offset", "HTTPTimeout": "--http-timeout"}

// longString stands in a usage message for a string over 100 bytes (a
// collection name refused for its length, say), which would drown the
// reason: it shows only the length.
type longString int

func (n longString) String() string { return fmt.Sprintf("(%d bytes)", int(n)) }

// valueUsage is the usage error for v, the value of flag, that a library
// refused for reason: a string is quoted, a nil value (none given) left
// out, any other shown as %v, so that every refusal reads alike.
func valueUsage(flag string, v any, reason string) error {
	switch v := v.(type) {
	case nil:
		return usagef("%s: %s", flag, reason)
	case string:
		return usagef("%s %q: %s", flag, v, reason)
	}
	return usagef("%s %v: %s", flag, v, reason)
}
