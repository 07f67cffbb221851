package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/outcome"
	"github.com/snapwriter/snapwriter/snapshot"
)

// runTimeouts runs args in process, with env, against no store at all
// (an input that does not exist ends a write before it connects), and
// returns the app, for its bound, with the exit code and the output.
func runTimeouts(t *testing.T, env map[string]string, args ...string) (*app, int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := newApp(strings.NewReader(""), &out, &errb, func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	code := a.run(context.Background(), args)
	return a, code, out.String(), errb.String()
}

// The write commands' bound on each request is --request-timeout;
// --timeout, its old name there, and SNAPWRITER_TIMEOUT still set it, with
// a notice on stderr (never stdout: a script reads that); both given
// agree or are refused; the command line wins over the environment; and
// what ran out is named by the name that set it.
func TestRequestTimeoutAndItsDeprecatedName(t *testing.T) {
	t.Parallel()
	missing := t.TempDir() + "/missing.json"
	write := []string{"write", "--input", missing}
	const (
		flagNotice = "Flag --timeout has been deprecated, use --request-timeout"
		envNotice  = "snapwriter: SNAPWRITER_TIMEOUT is deprecated, use SNAPWRITER_REQUEST_TIMEOUT"
	)
	for _, tc := range []struct {
		name   string
		env    map[string]string
		args   []string
		bound  time.Duration
		flag   string // a.timeoutFlag, as within() names it
		notice string // on stderr, "" for none
		refuse string // a usage error (exit 2) saying this, before anything runs
	}{
		{"default", nil, write, snapshot.DefaultRequestTimeout, "--request-timeout", "", ""},
		{"new name", nil, append(write, "--request-timeout", "7s"), 7 * time.Second, "--request-timeout", "", ""},
		{"old name", nil, append(write, "--timeout", "7s"), 7 * time.Second, "--timeout", flagNotice, ""},
		{"both, agreeing", nil, append(write, "--timeout", "7s", "--request-timeout", "7s"), 7 * time.Second, "--request-timeout", flagNotice, ""},
		{"both, disagreeing", nil, append(write, "--timeout", "7s", "--request-timeout", "9s"), 0, "", flagNotice,
			"snapwriter: --timeout 7s and --request-timeout 9s disagree: --timeout is the deprecated name of --request-timeout; give --request-timeout alone"},
		{"new variable", map[string]string{"SNAPWRITER_REQUEST_TIMEOUT": "7s"}, write, 7 * time.Second, "--request-timeout", "", ""},
		{"old variable", map[string]string{"SNAPWRITER_TIMEOUT": "7s"}, write, 7 * time.Second, "--timeout", envNotice, ""},
		{"both variables, disagreeing", map[string]string{"SNAPWRITER_TIMEOUT": "7s", "SNAPWRITER_REQUEST_TIMEOUT": "9s"}, write, 0, "", envNotice,
			"snapwriter: SNAPWRITER_TIMEOUT=7s and SNAPWRITER_REQUEST_TIMEOUT=9s disagree"},
		// The command line wins over either variable, whichever name it
		// gives: the variable is not even read.
		{"new flag over old variable", map[string]string{"SNAPWRITER_TIMEOUT": "9s"}, append(write, "--request-timeout", "7s"), 7 * time.Second, "--request-timeout", "", ""},
		{"old flag over new variable", map[string]string{"SNAPWRITER_REQUEST_TIMEOUT": "9s"}, append(write, "--timeout", "7s"), 7 * time.Second, "--timeout", flagNotice, ""},
		{"old name refused as given", nil, append(write, "--timeout", "0s"), 0, "", flagNotice, "snapwriter: --timeout 0s: want a positive duration"},
		{"every write command", nil, []string{"prune", "--keep-days", "-1", "--timeout", "7s"}, 0, "", flagNotice, "--keep-days -1"},
		// A read command's --timeout is its own, and bounds the whole
		// command: no notice; --request-timeout is not its flag.
		{"read command", nil, []string{"get", "--date", "bogus", "--timeout", "7s"}, 7 * time.Second, "--timeout", "", ""},
		{"read command, new name", nil, []string{"get", "--date", day, "--request-timeout", "7s"}, 0, "", "", "unknown flag: --request-timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, code, out, errs := runTimeouts(t, tc.env, tc.args...)
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			if got := tc.notice != "" && strings.Contains(errs, tc.notice); tc.notice != "" && !got {
				t.Errorf("stderr lacks %q:\n%s", tc.notice, errs)
			}
			if tc.notice == "" && strings.Contains(errs, "deprecated") {
				t.Errorf("a deprecation notice with no deprecated name given:\n%s", errs)
			}
			if tc.refuse != "" {
				if code != exitUsage || !strings.Contains(errs, tc.refuse) {
					t.Errorf("exit %d, want 2 and %q\n%s", code, tc.refuse, errs)
				}
				return
			}
			// Refused for its input (or --date), after the flags were read.
			if code != exitUsage {
				t.Errorf("exit %d, want 2 (the input)\n%s", code, errs)
			}
			if a.timeout != tc.bound || a.timeoutFlag != tc.flag {
				t.Errorf("bound %s %s, want %s %s", a.timeout, a.timeoutFlag, tc.bound, tc.flag)
			}
			if want := tc.bound.String() + " (" + tc.flag + ")"; a.within() != want {
				t.Errorf("within() = %q, want %q", a.within(), want)
			}
		})
	}
}

// Which commands take which bound: the write commands --request-timeout
// (and list no --timeout: it is hidden), the read commands --timeout.
func TestTimeoutFlagsByCommand(t *testing.T) {
	t.Parallel()
	for _, path := range [][]string{{"write"}, {"repair"}, {"backfill"}, {"schedule"}, {"prune"}, {"loadtest"}} {
		_, out, _ := runApp(t, nil, append(path, "--help")...)
		if !strings.Contains(out, "--request-timeout duration") || strings.Contains(out, "--timeout duration") {
			t.Errorf("%v --help: want --request-timeout and no --timeout:\n%s", path, out)
		}
		if !strings.Contains(out, "bounds each request, not the command") {
			t.Errorf("%v --help: --request-timeout does not say what it bounds:\n%s", path, out)
		}
	}
	for _, path := range [][]string{{"get"}, {"list"}, {"verify"}, {"diff"}, {"lock", "status"}, {"lock", "release"}} {
		_, out, _ := runApp(t, nil, append(path, "--help")...)
		if !strings.Contains(out, "--timeout duration") || strings.Contains(out, "request-timeout") {
			t.Errorf("%v --help: want --timeout and no --request-timeout:\n%s", path, out)
		}
		if !strings.Contains(out, "bounds the whole command") {
			t.Errorf("%v --help: --timeout does not say what it bounds:\n%s", path, out)
		}
	}
}

// get prints JSON whatever its flags: --compact prints it on one line;
// --json, its old name, still does, with a notice on stderr.
func TestGetCompactAndDeprecatedJSON(t *testing.T) {
	t.Parallel()
	_, out, _ := runApp(t, nil, "get", "--help")
	if !strings.Contains(out, "--compact") || strings.Contains(out, "--json") {
		t.Errorf("get --help: want --compact and no --json:\n%s", out)
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		compact bool
		refuse  string
	}{
		{"compact", nil, []string{"--compact"}, true, ""},
		{"json", nil, []string{"--json"}, true, "Flag --json has been deprecated, use --compact"},
		{"json variable", map[string]string{"SNAPWRITER_JSON": "true"}, nil, true, "SNAPWRITER_JSON is deprecated, use SNAPWRITER_COMPACT"},
		{"disagreeing", nil, []string{"--json", "--compact=false"}, false, "--json true and --compact false disagree"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out, errs := runApp(t, tc.env, append([]string{"get", "--date", "bogus"}, tc.args...)...)
			if code != exitUsage || out != "" {
				t.Errorf("exit %d, stdout %q; want 2 and nothing", code, out)
			}
			if tc.refuse != "" && !strings.Contains(errs, tc.refuse) {
				t.Errorf("stderr lacks %q:\n%s", tc.refuse, errs)
			}
		})
	}
	// And the output: one line with --compact and with --json, indented
	// without.
	c := newCLI(t)
	if code, _, errs := c.run(genJSON(t, day, 3), "write", "--input", "-"); code != exitOK {
		t.Fatalf("write: exit %d\n%s", code, errs)
	}
	for _, tc := range []struct {
		args  []string
		lines int
	}{{[]string{"--compact"}, 1}, {[]string{"--json"}, 1}, {nil, 0}} {
		code, out, errs := c.run("", append([]string{"get", "--date", day}, tc.args...)...)
		n := strings.Count(out, "\n")
		if code != exitOK || (tc.lines > 0 && n != tc.lines) || (tc.lines == 0 && n < 10) {
			t.Errorf("get %v: exit %d, %d lines\n%s", tc.args, code, n, errs)
		}
	}
}

// -v is not the version: cobra's shorthand is gone; --version prints what
// `snapwriter version` prints, in process and from the built binary.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	code, flagOut, errs := runApp(t, nil, "--version")
	_, cmdOut, _ := runApp(t, nil, "version")
	if code != exitOK || flagOut != cmdOut || !strings.HasPrefix(flagOut, "snapwriter ") {
		t.Errorf("--version: exit %d, %q; version: %q\n%s", code, flagOut, cmdOut, errs)
	}
	for _, args := range [][]string{{"-v"}, {"version", "-v"}, {"write", "-v"}} {
		if code, _, errs := runApp(t, nil, args...); code != exitUsage || !strings.Contains(errs, "unknown shorthand flag: 'v'") {
			t.Errorf("%v: exit %d, want 2 and an unknown shorthand\n%s", args, code, errs)
		}
	}
	bin := binary(t)
	run := func(args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = os.Environ()
		out, _ := cmd.Output()
		return string(out), cmd.ProcessState.ExitCode()
	}
	flagOut, fc := run("--version")
	cmdOut, cc := run("version")
	if fc != 0 || cc != 0 || flagOut != cmdOut {
		t.Errorf("binary: --version (exit %d) %q, version (exit %d) %q", fc, flagOut, cc, cmdOut)
	}
	if _, c := run("-v"); c != exitUsage {
		t.Errorf("binary: -v exit %d, want 2", c)
	}
}

// A command takes --project, --database, --collection, --log-format and
// --log-level only if it talks to Firestore (and logs): generate, version,
// policy and completion list none and refuse each (exit 2), while an
// unused SNAPWRITER_ variable of theirs is harmless, as one environment
// serves every command a job runs.
func TestStoreFlagsOnlyWhereUsed(t *testing.T) {
	t.Parallel()
	store := []string{"project", "database", "collection", "log-format", "log-level"}
	none := map[string][]string{
		"generate": {"generate", "--date", day}, "version": {"version"}, "policy": {"policy"}, "completion": {"completion", "bash"},
	}
	for name, args := range none {
		_, help, _ := runApp(t, nil, append(args, "--help")...)
		for _, f := range store {
			if strings.Contains(help, "--"+f) {
				t.Errorf("%s --help lists --%s:\n%s", name, f, help)
			}
			code, _, errs := runApp(t, nil, append(args, "--"+f, "x")...)
			if code != exitUsage || !strings.Contains(errs, "unknown flag: --"+f) {
				t.Errorf("%s --%s x: exit %d, want 2 unknown flag\n%s", name, f, code, errs)
			}
		}
		env := map[string]string{"SNAPWRITER_COLLECTION": "a/b", "SNAPWRITER_LOG_LEVEL": "verbose", "SNAPWRITER_PROJECT": "p",
			"SNAPWRITER_REQUEST_TIMEOUT": "soon", "SNAPWRITER_TIMEOUT": "soon"}
		if code, _, errs := runApp(t, env, args...); code != exitOK {
			t.Errorf("%s with unused SNAPWRITER_ variables: exit %d\n%s", name, code, errs)
		}
	}
	for _, path := range [][]string{{"write"}, {"get"}, {"list"}, {"repair"}, {"verify"}, {"backfill"}, {"schedule"},
		{"lock", "status"}, {"lock", "release"}, {"loadtest"}, {"prune"}, {"diff"}} {
		_, help, _ := runApp(t, nil, append(path, "--help")...)
		for _, f := range store {
			listed := regexp.MustCompile(`(?m)^\s+--` + f + ` string`).MatchString(help)
			if !listed {
				t.Errorf("%v --help does not list --%s\n%s", path, f, help)
			}
		}
	}
	// The variable applies to a command that takes the flag, and a flag
	// given before the command's name is still the command's.
	for _, tc := range []struct {
		env  map[string]string
		args []string
	}{
		{map[string]string{"SNAPWRITER_COLLECTION": "a/b"}, []string{"list"}},
		{nil, []string{"--collection", "a/b", "lock", "status", "--date", day}},
		{nil, []string{"lock", "status", "--date", day, "--collection", "a/b"}},
	} {
		if code, _, errs := runApp(t, tc.env, tc.args...); code != exitUsage || !regexp.MustCompile(`"?a/b"?: invalid collection name`).MatchString(errs) {
			t.Errorf("%v %v: exit %d, want 2 refusing the collection\n%s", tc.env, tc.args, code, errs)
		}
	}
}

// prune's and loadtest's --help say what each write flag does there, not
// what it does in a write; loadtest's --collection shows no default it
// would refuse.
func TestPruneAndLoadtestHelpTheirOwn(t *testing.T) {
	t.Parallel()
	_, prune, _ := runApp(t, nil, "prune", "--help")
	_, loadtest, _ := runApp(t, nil, "loadtest", "--help")
	for _, tc := range []struct {
		page, help string
		want       []string
		not        []string
	}{
		{"prune", prune,
			[]string{"documents deleted per chunk", "a prune starts at one", "document deletes a second", "--timezone string", "where prune's days end",
				`lock that is held (a writer at work; 0: skip the date at once, reported as lock held)`},
			[]string{"a write starts at one", "what loadtest found", "backfill tasks", "--record-interval", "--gate", "district writes"}},
		{"loadtest", loadtest,
			[]string{"scratch collection to write the test snapshots into", "another loadtest's run lock", "the rate every round writes at"},
			[]string{`(default "snapshots")`, "what loadtest found", "backfill tasks", "a write starts at one", "--allow-lock-backend-switch"}},
	} {
		for _, w := range tc.want {
			if !strings.Contains(tc.help, w) {
				t.Errorf("%s --help lacks %q:\n%s", tc.page, w, tc.help)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(tc.help, n) {
				t.Errorf("%s --help says %q:\n%s", tc.page, n, tc.help)
			}
		}
	}
	// loadtest without --collection: refused, not the writers' default.
	code, _, errs := runApp(t, map[string]string{"GOOGLE_CLOUD_PROJECT": "p", "FIRESTORE_EMULATOR_HOST": "127.0.0.1:1"}, "loadtest")
	if code != exitUsage || !strings.Contains(errs, "--collection is required") {
		t.Errorf("loadtest: exit %d, want 2 and --collection is required\n%s", code, errs)
	}
}

// prune's days end at midnight in --timezone: with the clock a second
// before and at midnight in New York (05:00 UTC, the next day already
// there), --keep-days 0 keeps New York's today, and in UTC the UTC date's.
func TestPruneDaysInTimezone(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	writeDays(t, c, "2026-11-19", "2026-11-20", "2026-11-21")
	midnightNY := time.Date(2026, 11, 21, 5, 0, 0, 0, time.UTC) // 2026-11-21 00:00 EST
	for _, tc := range []struct {
		name    string
		now     time.Time
		tz      []string
		today   string
		zone    string
		deleted []string
	}{
		{"New York, a second before midnight", midnightNY.Add(-time.Second), []string{"--timezone", "America/New_York"}, "2026-11-20", "America/New_York", []string{"2026-11-19"}},
		{"New York, at midnight", midnightNY, []string{"--timezone", "America/New_York"}, "2026-11-21", "America/New_York", []string{"2026-11-19", "2026-11-20"}},
		{"UTC by default, the same instant", midnightNY.Add(-time.Second), nil, "2026-11-21", "UTC", []string{"2026-11-19", "2026-11-20"}},
		// East of UTC the day starts before UTC's: midnight in Tokyo is
		// still the 20th in UTC.
		{"Tokyo, at midnight", time.Date(2026, 11, 20, 15, 0, 0, 0, time.UTC), []string{"--timezone", "Asia/Tokyo"}, "2026-11-21", "Asia/Tokyo", []string{"2026-11-19", "2026-11-20"}},
		{"UTC, the same instant", time.Date(2026, 11, 20, 15, 0, 0, 0, time.UTC), []string{"--timezone", "UTC"}, "2026-11-20", "UTC", []string{"2026-11-19"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.now = func() time.Time { return tc.now }
			rep := pruneJSON(t, c, exitOK, append([]string{"--keep-days", "0", "--dry-run"}, tc.tz...)...)
			if rep.Today != tc.today || rep.TimeZone != tc.zone {
				t.Errorf("today %s %s, want %s %s", rep.Today, rep.TimeZone, tc.today, tc.zone)
			}
			got := outcomes(rep)
			if len(got) != len(tc.deleted) {
				t.Errorf("selected %v, want %v", got, tc.deleted)
			}
			for _, d := range tc.deleted {
				if got[d] != outcome.WouldPrune {
					t.Errorf("%s: %q, want would-prune (%v)", d, got[d], got)
				}
			}
		})
	}
	c.now = func() time.Time { return midnightNY }
	if code, _, errs := c.run("", "prune", "--keep-days", "0", "--dry-run", "--timezone", "Mars/Olympus"); code != exitUsage ||
		!strings.Contains(errs, `--timezone "Mars/Olympus": want an IANA time zone`) {
		t.Errorf("a bad --timezone: exit %d, want 2\n%s", code, errs)
	}
	_, text, _ := c.run("", "prune", "--keep-days", "0", "--dry-run", "--timezone", "America/New_York")
	if !strings.Contains(text, "(today 2026-11-21, America/New_York)") {
		t.Errorf("the text report does not say the zone:\n%s", text)
	}
}

// The shipped Cloud Run jobs set SNAPWRITER_ variables only for flags
// their command takes, under their current names (no deprecated one, which
// would print a notice on every run).
func TestDeployEnvNamesFlagsOfItsCommand(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"job.yaml", "daily-job.yaml"} {
		b, err := os.ReadFile("../../deploy/" + name)
		if err != nil {
			t.Fatal(err)
		}
		args := jobArgs(t, name)
		cmd, _, err := newApp(nil, nil, nil, nil).rootCommand().Find(args[:1])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		vars := regexp.MustCompile(`name: (SNAPWRITER_[A-Z_]+)`).FindAllStringSubmatch(string(b), -1)
		if len(vars) == 0 {
			t.Fatalf("%s sets no SNAPWRITER_ variable: the test checks nothing", name)
		}
		for _, m := range vars {
			flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(m[1], "SNAPWRITER_"), "_", "-"))
			f := cmd.Flags().Lookup(flag)
			switch {
			case f == nil:
				t.Errorf("%s: %s names no flag of %s", name, m[1], args[0])
			case f.Hidden:
				t.Errorf("%s: %s names %s's deprecated --%s", name, m[1], args[0], flag)
			}
		}
	}
}
