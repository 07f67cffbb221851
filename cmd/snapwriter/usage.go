package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/snapwriter/snapwriter/backfill"
	"github.com/snapwriter/snapwriter/internal/ending"
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

// Is makes a usageError the table of endings' usage ending: exit 2.
func (e usageError) Is(target error) bool { return target == ending.ErrUsage }

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
	snapshot.SettingRequestTimeout: "--request-timeout",
}

// shardUsage is usage(err) for backfill.TaskShard's error, which for an
// index and a count that make no shard says where each came from: the
// flag given (index and count, -1 when not; envNamed names its
// SNAPWRITER_ variable when it came from there), else Cloud Run's
// variable (read through lookupEnv), else the default.
func shardUsage(err error, index, count int, lookupEnv func(string) (string, bool)) error {
	if !errors.Is(err, backfill.ErrShard) {
		return usage(err)
	}
	from := func(v int, flag, env string) string {
		if v >= 0 {
			return fmt.Sprintf("%s %d", flag, v)
		}
		if s, ok := lookupEnv(env); ok && s != "" {
			return envAssignment(env, s)
		}
		return "the default"
	}
	return usagef("%v (index from %s, count from %s)", err,
		from(index, "--task-index", backfill.TaskIndexEnv), from(count, "--task-count", backfill.TaskCountEnv))
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

// envSetting is a flag applyEnv set from its SNAPWRITER_<FLAG> variable:
// raw is the variable's value as given, value the flag's value after it
// (pflag's form: a duration "90s" is "1m30s").
type envSetting struct {
	flag, variable, raw, value string
}

// envName is the variable that stands in for flag: SNAPWRITER_ and the
// flag's name in upper case, "-" as "_".
func envName(flag string) string {
	return "SNAPWRITER_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// envValueUsage is the usage error for raw, the value of variable, that
// its flag refused (err, pflag's): it names the variable and says why,
// not "invalid argument … for --flag", a flag the user never typed.
func envValueUsage(variable, raw string, err error) error {
	var ive *pflag.InvalidValueError
	if errors.As(err, &ive) {
		err = errors.Unwrap(ive)
	}
	return usagef("%s: %v", envAssignment(variable, raw), err)
}

// envAssignment is variable=raw as a shell would take it: raw quoted
// when it is empty or holds a space or a character a shell or the
// message would read otherwise.
func envAssignment(variable, raw string) string {
	if raw == "" || strings.ContainsAny(raw, " \t\n\"'`$\\;,:()") {
		raw = strconv.Quote(raw)
	}
	return variable + "=" + raw
}

// envNamed is msg, a refusal of the command line, with each reference to
// a flag set from the environment (set) replaced by its variable: "--x V"
// (the flag and the value it holds, as a message shows it: %v or %q) by
// "SNAPWRITER_X=raw", a bare "--x" by "SNAPWRITER_X". The checks that
// refuse values name flags, in many places; this is the one place that
// knows where a value came from.
func envNamed(msg string, set []envSetting) string {
	for _, e := range set {
		msg = e.rename(msg)
	}
	return msg
}

// rename does envNamed's work for one flag.
func (e envSetting) rename(msg string) string {
	ref := "--" + e.flag
	var b strings.Builder
	for {
		i := strings.Index(msg, ref)
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		end := i + len(ref)
		// A whole flag name only: not --lock-wait in --lock-waiting, not
		// --x within ---x or a-x.
		if i > 0 && isFlagNameByte(msg[i-1]) || end < len(msg) && isFlagNameByte(msg[end]) {
			b.WriteString(msg[:end])
			msg = msg[end:]
			continue
		}
		b.WriteString(msg[:i])
		if n, ok := e.valueAt(msg[end:]); ok {
			b.WriteString(envAssignment(e.variable, e.raw))
			end += n
		} else {
			b.WriteString(e.variable)
		}
		msg = msg[end:]
	}
}

// valueAt reports whether s, what follows the flag's name in a message,
// starts with " " and the flag's value, and how many bytes that takes.
func (e envSetting) valueAt(s string) (int, bool) {
	rest, ok := strings.CutPrefix(s, " ")
	if !ok || rest == "" {
		return 0, false
	}
	token, v := rest, ""
	switch j := strings.IndexAny(rest, " ,:;)"); {
	case rest[0] == '"':
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return 0, false
		}
		token = q
		v, _ = strconv.Unquote(q)
	case rest[0] == '[':
		// A list as %v shows it, [3 16]; pflag's is [3,16].
		if k := strings.IndexByte(rest, ']'); k >= 0 {
			token = rest[:k+1]
		}
		v = strings.ReplaceAll(token, " ", ",")
	case j >= 0:
		token = rest[:j]
		v = token
	default:
		v = token
	}
	if v != e.value && v != e.raw {
		return 0, false
	}
	return 1 + len(token), true
}

func isFlagNameByte(c byte) bool {
	return c == '-' || c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// plainBools wraps usage, cobra's usage function, so that a boolean flag
// is listed as "--dry-run", not "--dry-run[=true|false]": pflag v1.1.0
// writes that for every flag whose value says it is a boolean
// (IsBoolFlag), and a newcomer reads it as a value to give. --x=false
// still works, and the usage of a flag that defaults to true says how to
// turn it off.
func plainBools(usage func(*cobra.Command) error) func(*cobra.Command) error {
	return func(c *cobra.Command) error {
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.InheritedFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if b, ok := f.Value.(boolFlag); ok && b.IsBoolFlag() {
					f.Value = plainBool{f.Value}
				}
			})
		}
		return usage(c)
	}
}

// boolFlag is pflag's (unexported) interface of a boolean flag's value.
type boolFlag interface {
	pflag.Value
	IsBoolFlag() bool
}

// plainBool is a boolean flag's value without IsBoolFlag, for the usage
// listing alone: pflag parses a flag given without a value by its
// NoOptDefVal ("true"), which the flag keeps, and reads it by Type and
// String, which plainBool passes on.
type plainBool struct{ pflag.Value }

// unsetInt is an int flag whose default is not a number but words of its
// usage ("default CLOUD_RUN_TASK_COUNT, else 1"): -1 stands for not
// given, and --help shows no "(default -1)" beside those words, since
// pflag shows no default whose text is empty.
type unsetInt int

func newUnsetInt(p *int) *unsetInt {
	*p = -1
	return (*unsetInt)(p)
}

func (v *unsetInt) String() string {
	if *v < 0 {
		return ""
	}
	return strconv.Itoa(int(*v))
}

// Set parses s as pflag parses an int flag's value, and refuses it in
// the same words.
func (v *unsetInt) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if err != nil {
		return errors.New("must be an integer")
	}
	*v = unsetInt(n)
	return nil
}

// Type is "int", as --help shows it.
func (v *unsetInt) Type() string { return "int" }
