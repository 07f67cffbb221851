package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/snapwriter/snapwriter/pacing"
)

// A value refused that came from SNAPWRITER_<FLAG> is named by the
// variable, the value as it was given; the same value on the command line
// by the flag; and the command line wins over the environment. Every
// refusal here comes before Firestore is touched: exit 2.
func TestEnvValueRefusalNamesVariable(t *testing.T) {
	t.Parallel()
	write := []string{"write", "--input", "-"}
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string // the message, after "snapwriter: "
	}{
		{"concurrency", map[string]string{"SNAPWRITER_CONCURRENCY": "0"}, write, "SNAPWRITER_CONCURRENCY=0: want 1..256"},
		{"concurrency flag", nil, append(write, "--concurrency", "0"), "--concurrency 0: want 1..256"},
		{"batch size", map[string]string{"SNAPWRITER_BATCH_SIZE": "501"}, write, "SNAPWRITER_BATCH_SIZE=501: want 1..500"},
		{"batch size flag", nil, append(write, "--batch-size", "501"), "--batch-size 501: want 1..500"},
		{"lock ttl", map[string]string{"SNAPWRITER_LOCK_TTL": "500ms"}, write, "SNAPWRITER_LOCK_TTL=500ms: want at least 1s"},
		{"lock ttl flag", nil, append(write, "--lock-ttl", "500ms"), "--lock-ttl 500ms: want at least 1s"},
		// The value as given, not as Go prints the duration (-1m30s).
		{"timeout", map[string]string{"SNAPWRITER_TIMEOUT": "-90s"}, []string{"list"}, "SNAPWRITER_TIMEOUT=-90s: want a positive duration such as 30s"},
		{"timeout flag", nil, []string{"list", "--timeout", "-90s"}, "--timeout -1m30s: want a positive duration such as 30s"},
		{"initial write rate", map[string]string{"SNAPWRITER_INITIAL_WRITE_RATE": "0"}, write,
			"SNAPWRITER_INITIAL_WRITE_RATE=0, --max-write-rate 10000: want 0 < initial ≤ max"},
		// A maximum alone lowers the default start (TestMaxWriteRate…);
		// a start the user gave above it contradicts it.
		{"max write rate below a start given", map[string]string{"SNAPWRITER_MAX_WRITE_RATE": "100", "SNAPWRITER_INITIAL_WRITE_RATE": "500"}, write,
			"SNAPWRITER_INITIAL_WRITE_RATE=500, SNAPWRITER_MAX_WRITE_RATE=100: the start is above the maximum"},
		{"max write rate flag below a start given", nil, append(write, "--max-write-rate", "100", "--initial-write-rate", "200"),
			"--initial-write-rate 200, --max-write-rate 100: the start is above the maximum"},
		{"max write rate zero", nil, append(write, "--max-write-rate", "0"), "--initial-write-rate 500, --max-write-rate 0: want 0 < initial ≤ max"},
		{"log level", map[string]string{"SNAPWRITER_LOG_LEVEL": "verbose"}, []string{"list"}, "SNAPWRITER_LOG_LEVEL=verbose: want debug, info, warn or error"},
		{"log level flag", nil, []string{"list", "--log-level", "verbose"}, `--log-level "verbose": want debug, info, warn or error`},
		{"log format", map[string]string{"SNAPWRITER_LOG_FORMAT": "xml"}, []string{"list"}, "SNAPWRITER_LOG_FORMAT=xml: want auto, json or console"},
		{"log format flag", nil, []string{"list", "--log-format", "xml"}, `--log-format "xml": want auto, json or console`},
		{"keep days", map[string]string{"SNAPWRITER_KEEP_DAYS": "-1"}, []string{"prune"}, "SNAPWRITER_KEEP_DAYS=-1: want 0 or more"},
		{"keep days flag", nil, []string{"prune", "--keep-days", "-1"}, "--keep-days -1: want 0 or more"},
		{"task count", map[string]string{"SNAPWRITER_TASK_COUNT": "0"}, []string{"backfill", "--input-dir", "."},
			"task 0 of 0: want 0 <= index < count (index from the default, count from SNAPWRITER_TASK_COUNT=0)"},
		{"task count flag", nil, []string{"backfill", "--input-dir", ".", "--task-count", "0"},
			"task 0 of 0: want 0 <= index < count (index from the default, count from --task-count 0)"},
		{"task count not a number", map[string]string{"SNAPWRITER_TASK_COUNT": "four"}, []string{"backfill", "--input-dir", "."},
			"SNAPWRITER_TASK_COUNT=four: must be an integer"},
		{"bool", map[string]string{"SNAPWRITER_DRY_RUN": "maybe"}, write, "SNAPWRITER_DRY_RUN=maybe: must be true or false"},
		{"bool flag", nil, append(write, "--dry-run=maybe"), `invalid argument "maybe" for "--dry-run" flag: must be true or false`},
		{"collection", map[string]string{"SNAPWRITER_COLLECTION": "a b/c"}, []string{"list"}, `SNAPWRITER_COLLECTION="a b/c": `},
		// A flag named, not refused, is named by its variable too.
		{"lock backend", map[string]string{"SNAPWRITER_LOCK_BACKEND": "postgres"}, write,
			"SNAPWRITER_LOCK_BACKEND=postgres needs --lock-dsn (or SNAPWRITER_LOCK_DSN)"},
		{"lock dsn", map[string]string{"SNAPWRITER_LOCK_DSN": "host=db"}, write,
			`SNAPWRITER_LOCK_DSN is only for --lock-backend postgres (the lock backend is "firestore")`},
		// The command line wins: the environment's good value is not
		// used, nor its bad one named.
		{"flag over env", map[string]string{"SNAPWRITER_CONCURRENCY": "4"}, append(write, "--concurrency", "0"), "--concurrency 0: want 1..256"},
		{"flag over bad env", map[string]string{"SNAPWRITER_CONCURRENCY": "0", "SNAPWRITER_BATCH_SIZE": "0"},
			append(write, "--concurrency", "4", "--batch-size", "0"), "--batch-size 0: want 1..500"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"GOOGLE_CLOUD_PROJECT": "p", "FIRESTORE_EMULATOR_HOST": "127.0.0.1:1"}
			for k, v := range tc.env {
				env[k] = v
			}
			code, out, errs := runApp(t, env, tc.args...)
			if code != exitUsage || !strings.HasPrefix(errs, "snapwriter: "+tc.want) {
				t.Errorf("exit %d, want 2 and %q\n%s%s", code, tc.want, out, errs)
			}
			if tc.env == nil && strings.Contains(errs, "SNAPWRITER_") {
				t.Errorf("names a variable that is not set:\n%s", errs)
			}
		})
	}
}

func TestEnvNamed(t *testing.T) {
	t.Parallel()
	set := []envSetting{
		{flag: "lock-wait", variable: "SNAPWRITER_LOCK_WAIT", raw: "90s", value: "1m30s"},
		{flag: "log-level", variable: "SNAPWRITER_LOG_LEVEL", raw: "very verbose", value: "very verbose"},
		{flag: "input-dir", variable: "SNAPWRITER_INPUT_DIR", raw: "/data", value: "/data"},
		{flag: "concurrency", variable: "SNAPWRITER_CONCURRENCY", raw: "3,3", value: "[3,3]"},
	}
	for _, tc := range []struct{ in, want string }{
		{"--lock-wait 1m30s: too long", "SNAPWRITER_LOCK_WAIT=90s: too long"},
		{"--lock-wait 90s, more", "SNAPWRITER_LOCK_WAIT=90s, more"},
		{"(to --lock-wait plus --timeout)", "(to SNAPWRITER_LOCK_WAIT plus --timeout)"},
		{"--lock-waiting 1m30s and ---lock-wait", "--lock-waiting 1m30s and ---lock-wait"},
		{`--log-level "very verbose": want info`, `SNAPWRITER_LOG_LEVEL="very verbose": want info`},
		{"give exactly one of --input-dir and --input-url", "give exactly one of SNAPWRITER_INPUT_DIR and --input-url"},
		{"--input-dir /data: not a directory; --input-dir", "SNAPWRITER_INPUT_DIR=/data: not a directory; SNAPWRITER_INPUT_DIR"},
		{"--lock-wait", "SNAPWRITER_LOCK_WAIT"},
		{"--concurrency [3 3]: 3 is listed twice", `SNAPWRITER_CONCURRENCY="3,3": 3 is listed twice`},
		{"nothing to rename", "nothing to rename"},
	} {
		if got := envNamed(tc.in, set); got != tc.want {
			t.Errorf("envNamed(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A usage error points to the --help of the command that failed, not the
// root's; an unknown command to its parent's.
func TestUsagePointsToCommandHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"write", "--bogus"}, "Run 'snapwriter write --help' for usage."},
		{[]string{"write", "-x"}, "Run 'snapwriter write --help' for usage."},
		{[]string{"get"}, "Run 'snapwriter get --help' for usage."},
		{[]string{"lock", "status", "--bogus"}, "Run 'snapwriter lock status --help' for usage."},
		{[]string{"lock", "bogus"}, "Run 'snapwriter lock --help' for usage."},
		{[]string{"bogus"}, "Run 'snapwriter --help' for usage."},
		{[]string{"--bogus"}, "Run 'snapwriter --help' for usage."},
	} {
		code, _, errs := runApp(t, nil, tc.args...)
		if code != exitUsage || !strings.HasSuffix(errs, tc.want+"\n") {
			t.Errorf("%v: exit %d, want 2 and %q\n%s", tc.args, code, tc.want, errs)
		}
	}
}

// A maximum the user gives (flag or SNAPWRITER_MAX_WRITE_RATE) without a
// start of their own lowers the default start to it: loadtest's measured
// 150/s is a usable cap on its own, for one writer or four tasks. With
// --write-ramp=false the maximum is the rate throughout anyway.
func TestMaxWriteRateLowersTheDefaultStart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		env       map[string]string
		args      []string
		want      pacing.Ramp
		lowered   bool
		tasks     int
		wantShare float64 // the share's start
	}{
		{"flag", nil, []string{"--max-write-rate", "150"}, pacing.Ramp{Initial: 150, Max: 150, Growth: 1.5, Every: 5 * time.Minute}, true, 1, 150},
		{"env", map[string]string{"SNAPWRITER_MAX_WRITE_RATE": "150"}, nil, pacing.Ramp{Initial: 150, Max: 150, Growth: 1.5, Every: 5 * time.Minute}, true, 1, 150},
		{"four tasks", nil, []string{"--max-write-rate", "200"}, pacing.Ramp{Initial: 200, Max: 200, Growth: 1.5, Every: 5 * time.Minute}, true, 4, 50},
		{"above the start", nil, []string{"--max-write-rate", "800"}, pacing.Ramp{Initial: 500, Max: 800, Growth: 1.5, Every: 5 * time.Minute}, false, 1, 500},
		{"start given", nil, []string{"--max-write-rate", "150", "--initial-write-rate", "100"}, pacing.Ramp{Initial: 100, Max: 150, Growth: 1.5, Every: 5 * time.Minute}, false, 1, 100},
		{"no ramp", nil, []string{"--max-write-rate", "150", "--write-ramp=false"}, pacing.Fixed(150), false, 1, 150},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := parseWriteFlags(t, c.env, c.args...)
			if got := f.writeRamp(); got != c.want || f.startLowered() != c.lowered {
				t.Errorf("ramp %+v, lowered %v; want %+v, %v", got, f.startLowered(), c.want, c.lowered)
			}
			if err := f.validate(); err != nil {
				t.Errorf("validate: %v", err)
			}
			f.share = c.tasks
			if got := f.budget().Limit(); got != c.wantShare {
				t.Errorf("the budget's rate %v, want %v", got, c.wantShare)
			}
		})
	}
}

// parseWriteFlags is the write flags as a command parses them from args,
// then fills those left unset from env (SNAPWRITER_<FLAG>), as applyEnv
// does.
func parseWriteFlags(t *testing.T, env map[string]string, args ...string) writeFlags {
	t.Helper()
	fl := pflag.NewFlagSet("write", pflag.ContinueOnError)
	var f writeFlags
	f.register(fl)
	if err := fl.Parse(args); err != nil {
		t.Fatal(err)
	}
	for k, v := range env {
		name := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "SNAPWRITER_"), "_", "-"))
		if fl.Lookup(name).Changed {
			continue
		}
		if err := fl.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	return f
}
