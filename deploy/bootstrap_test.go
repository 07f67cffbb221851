package deploy

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Every shell script of the repository passes shellcheck. shellcheck
// must be installed (Debian: apt-get install shellcheck; .ci/run does):
// without it this test fails rather than skips, so that CI cannot pass
// without having run it.
func TestShellcheck(t *testing.T) {
	if testing.Short() {
		t.Skip("runs shellcheck, a tool of its own: skipped in -short mode")
	}
	t.Parallel()
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Fatal("shellcheck is not installed (Debian: apt-get install shellcheck); it checks deploy/*.sh and scripts/*.sh")
	}
	scripts, _ := filepath.Glob("*.sh")
	more, _ := filepath.Glob("../scripts/*.sh")
	scripts = append(scripts, more...)
	if !slices.Contains(scripts, "bootstrap.sh") || len(more) == 0 {
		t.Fatalf("scripts found: %v", scripts)
	}
	out, err := exec.Command(sc, append([]string{"--external-sources"}, scripts...)...).CombinedOutput()
	if err != nil {
		t.Errorf("shellcheck %v: %v\n%s", scripts, err, out)
	}
}

// recordingGcloud is a gcloud that only records that it was called.
const recordingGcloud = `#!/usr/bin/env bash
echo "gcloud $*" >> "$GCLOUD_CALLS"
exit 1
`

// bootstrap runs bootstrap.sh with args, gcloud being the script in
// bin (and the state and call log in dir), and returns its exit code
// and output.
func bootstrap(t *testing.T, bin, dir string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"bootstrap.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GCLOUD_CALLS="+filepath.Join(dir, "calls"), "GCLOUD_STATE="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("bootstrap.sh: %v", err)
	return 0, "", ""
}

// fakeBin writes script as bin/gcloud in a new directory and returns it
// and a directory for its state.
func fakeBin(t *testing.T, script string) (bin, dir string) {
	t.Helper()
	bin, dir = t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "gcloud"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, dir
}

func calls(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "calls"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

var required = []string{"--project", "test-proj1", "--region", "europe-west3", "--bucket", "exports-bucket", "--tag", "t1"}

// A missing required flag or a value the script cannot use is a usage
// error: exit 2, the reason on stderr, and gcloud never called.
func TestBootstrapUsage(t *testing.T) {
	t.Parallel()
	bin, dir := fakeBin(t, recordingGcloud)
	with := func(flag, value string) []string {
		args := slices.Clone(required)
		if i := slices.Index(args, flag); i >= 0 {
			args[i+1] = value
			return args
		}
		return append(args, flag, value)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "missing required flag(s): --project --region --bucket"},
		{[]string{"--project", "test-proj1", "--region", "europe-west3"}, "missing required flag(s): --bucket"},
		{with("--bucket", "gs://exports-bucket"), "without gs://"},
		{with("--project", "Test_Proj"), "want a project id"},
		{with("--region", "europe west3"), "want a Google Cloud region"},
		{with("--time-zone", "Mars/Olympus_Mons"), "not a time zone"},
		{with("--time-zone", "Europe/Berlin|x"), "want an IANA time zone"},
		{with("--schedule", "0 6 * *"), "five-field cron"},
		{with("--notification-channel", "email-me"), "notificationChannels"},
		{append(slices.Clone(required), "--colour", "red"), "unknown flag: --colour"},
		{append(slices.Clone(required), "--project"), "--project needs a value"},
	} {
		code, out, errs := bootstrap(t, bin, dir, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) || !strings.Contains(errs, "--help") {
			t.Errorf("%v: exit %d, want 2 and %q on stderr\n%s%s", c.args, code, c.want, out, errs)
		}
	}
	code, out, _ := bootstrap(t, bin, dir, "--help")
	for _, role := range []string{"roles/serviceusage.serviceUsageAdmin", "roles/artifactregistry.admin", "roles/datastore.owner",
		"roles/resourcemanager.projectIamAdmin", "roles/cloudbuild.builds.editor", "roles/run.admin", "roles/iam.serviceAccountUser",
		"roles/cloudscheduler.admin", "roles/monitoring.alertPolicyEditor"} {
		if code != 0 || !strings.Contains(out, role) {
			t.Errorf("--help (exit %d) does not name the deployer's role %s", code, role)
		}
	}
	if c := calls(t, dir); c != nil {
		t.Errorf("gcloud was called: %v", c)
	}
}

// shellWords splits a line as the shell would read the words bash's
// printf %q and Python's shlex.join print: backslash escapes, single and
// double quotes.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == ' ':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		case c == '\'' || c == '"':
			end := strings.IndexByte(line[i+1:], c)
			if end < 0 {
				t.Fatalf("unbalanced quote in %s", line)
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// ansi is a terminal escape gcloud's help may carry.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// gcloudHelp runs `gcloud WORDS --help` and returns the command's name, as
// its help's NAME section gives it, and the help; ok false when gcloud
// has no such command.
func gcloudHelp(gcloud string, words []string) (name, help string, ok bool) {
	cmd := exec.Command(gcloud, append(slices.Clone(words), "--help")...)
	cmd.Env = append(os.Environ(), "CLOUDSDK_CORE_DISABLE_PROMPTS=1", "PAGER=cat", "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING=true",
		"CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK=true")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", string(out), false
	}
	help = ansi.ReplaceAllString(string(out), "")
	m := regexp.MustCompile(`(?m)^NAME\n\s+(gcloud [^\n]*?) - `).FindStringSubmatch(help)
	if m == nil {
		return "", help, false
	}
	return strings.Join(strings.Fields(m[1]), " "), help, true
}

// Every gcloud command line a dry run prints is one the installed gcloud
// has, with flags its help names: each command's `--help` succeeds and
// lists each --flag used (gcloud-wide flags such as --project and
// --format are listed in every command's help). The dry run itself runs
// no gcloud command at all. Needs gcloud; about a minute (gcloud's help is
// slow), the helps asked one at a time.
func TestBootstrapDryRunCommandsExist(t *testing.T) {
	if testing.Short() {
		t.Skip("asks gcloud's help of some 25 commands, a minute or more: skipped in -short mode")
	}
	t.Parallel()
	gcloud, err := exec.LookPath("gcloud")
	if err != nil {
		t.Fatal("gcloud is not installed; the dry run's commands are checked against its help")
	}
	bin, dir := fakeBin(t, recordingGcloud)
	code, out, errs := bootstrap(t, bin, dir, append(slices.Clone(required), "--dry-run", "--notification-channel", "projects/test-proj1/notificationChannels/123")...)
	if code != 0 {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errs)
	}
	if c := calls(t, dir); c != nil {
		t.Fatalf("the dry run called gcloud: %v", c)
	}
	var lines [][]string
	for l := range strings.Lines(out + errs) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "+ gcloud "); ok {
			lines = append(lines, shellWords(t, rest))
		}
	}
	if len(lines) < 30 {
		t.Fatalf("%d gcloud commands printed:\n%s%s", len(lines), out, errs)
	}
	for _, want := range []string{"services enable", "artifacts repositories create", "firestore databases create",
		"iam service-accounts create", "projects add-iam-policy-binding", "storage buckets add-iam-policy-binding",
		"builds submit", "firestore indexes fields update", "run jobs replace", "run jobs add-iam-policy-binding",
		"scheduler jobs create http", "alpha monitoring policies create", "monitoring dashboards create"} {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(strings.Join(l, " "), want+" ")
		}
		if !found {
			t.Errorf("the dry run prints no gcloud %s", want)
		}
	}

	type helpResult struct {
		name, help string
		ok         bool
	}
	// The helps are asked shortest command first, a wave per length, so
	// that a longer one whose start is a command already known (an
	// argument that looks like a subcommand: a field named "data") is not
	// asked again. One at a time: gcloud is a Python program that keeps a
	// core busy for a second or more per help, and the rest of `make test`
	// (the emulator, timing-sensitive tests) shares the machine's cores.
	cache := map[string]*helpResult{} // a command's words → its help
	byLen := map[int][]string{}
	for _, l := range lines {
		key := strings.Join(commandWords(l), " ")
		if _, ok := cache[key]; !ok {
			cache[key] = nil
			byLen[len(strings.Fields(key))] = append(byLen[len(strings.Fields(key))], key)
		}
	}
	var known []*helpResult // the commands of the waves before
	start := time.Now()
	for n := range 8 {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 1)
		var wave []*helpResult
	keys:
		for _, key := range byLen[n] {
			for _, r := range known {
				if r.ok && strings.HasPrefix("gcloud "+key+" ", r.name+" ") {
					cache[key] = r
					continue keys
				}
			}
			r := &helpResult{}
			cache[key] = r
			wave = append(wave, r)
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				r.name, r.help, r.ok = gcloudHelp(gcloud, strings.Fields(key))
			})
		}
		wg.Wait()
		known = append(known, wave...)
	}
	t.Logf("%d gcloud commands, %d helps asked in %v", len(lines), len(known), time.Since(start).Round(time.Second))
	for _, l := range lines {
		words := commandWords(l)
		r := cache[strings.Join(words, " ")]
		if !r.ok {
			t.Errorf("gcloud %s: no such command in the installed gcloud:\n%s", strings.Join(l, " "), r.help)
			continue
		}
		// The help is the command's own, the words after its name its
		// arguments.
		if !strings.HasPrefix("gcloud "+strings.Join(words, " ")+" ", r.name+" ") {
			t.Errorf("gcloud %s: the command is %s", strings.Join(l, " "), r.name)
		}
		for _, w := range l[len(words):] {
			if !strings.HasPrefix(w, "--") {
				continue
			}
			flag, _, _ := strings.Cut(w, "=")
			if !regexp.MustCompile(`(^|[^a-z-])` + regexp.QuoteMeta(flag) + `([^a-z-]|$)`).MatchString(r.help) {
				t.Errorf("%s: flag %s is not in its help", r.name, flag)
			}
		}
	}
}

// commandWords are the words of a gcloud command line that name the
// command: those before its first argument, which is the first word that
// is a flag, holds anything but lowercase letters and hyphens (a path, a
// URL, an e-mail, a project id with digits, a field path), or names one
// of snapwriter's resources. Asking gcloud's help of the command alone,
// not once per argument, keeps the test to one help per command.
func commandWords(line []string) []string {
	i := slices.IndexFunc(line, func(w string) bool {
		return strings.HasPrefix(w, "-") || strings.HasPrefix(w, "snapwriter") || !regexp.MustCompile(`^[a-z-]+$`).MatchString(w)
	})
	if i < 0 {
		return line
	}
	return line[:i]
}

// fakeGcloud is a gcloud standing in for an empty project that remembers
// what was created (in $GCLOUD_STATE/state) and answers describe, list and
// get-iam-policy from it, as the real services would; every call is
// logged to $GCLOUD_CALLS. A composite index created twice answers
// ALREADY_EXISTS, as Firestore does. The files the jobs were replaced from
// are kept as $GCLOUD_STATE/<job name>.yaml.
const fakeGcloud = `#!/usr/bin/env python3
import json, os, re, shlex, shutil, sys
args = sys.argv[1:]
state_dir = os.environ["GCLOUD_STATE"]
with open(os.environ["GCLOUD_CALLS"], "a") as f:
    f.write("gcloud " + shlex.join(args) + "\n")
path = os.path.join(state_dir, "state")
state = set(open(path).read().splitlines()) if os.path.exists(path) else set()
def add(*keys):
    state.update(keys)
    open(path, "w").write("\n".join(sorted(state)) + "\n")
words = [a for a in args if not a.startswith("-")]
flags = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
cmd = " ".join(words)
def has(key):
    return key in state
def missing():
    sys.stderr.write("ERROR: NOT_FOUND\n")
    sys.exit(1)

if cmd == "services list":
    print("\n".join(sorted(k[4:] for k in state if k.startswith("api "))))
elif cmd.startswith("services enable "):
    add(*("api " + w for w in words[2:]))
elif cmd.startswith("artifacts repositories describe "):
    has("repo " + words[3]) or missing()
elif cmd.startswith("artifacts repositories create "):
    add("repo " + words[3])
elif cmd == "firestore databases describe":
    print("FIRESTORE_NATIVE") if has("db " + flags["database"]) else missing()
elif cmd == "firestore databases create":
    add("db " + flags["database"])
elif cmd.startswith("iam service-accounts describe "):
    has("sa " + words[3].split("@")[0]) or missing()
elif cmd.startswith("iam service-accounts create "):
    add("sa " + words[3])
elif " get-iam-policy " in " " + cmd + " ":
    target = cmd.replace("get-iam-policy", "iam")
    for k in sorted(state):
        if k.startswith(target + " | "):
            print(k.split(" | ", 1)[1])
elif " add-iam-policy-binding " in " " + cmd + " ":
    add(cmd.replace("add-iam-policy-binding", "iam") + " | " + flags["role"] + "," + flags["member"])
elif cmd.startswith("artifacts docker images describe "):
    has("image " + words[4]) or missing()
elif cmd.startswith("builds submit"):
    subs = dict(s.split("=", 1) for s in flags["substitutions"].split(","))
    add("image " + subs["_IMAGE"])
elif cmd.startswith("firestore indexes fields update "):
    pass
elif cmd == "firestore indexes composite create":
    key = "index " + " ".join(a for a in args if a.startswith("--field-config") or a.startswith("--collection-group"))
    if has(key):
        sys.stderr.write("ERROR: (gcloud.firestore.indexes.composite.create) ALREADY_EXISTS: index already exists\n")
        sys.exit(1)
    add(key)
elif cmd.startswith("run jobs describe "):
    has("job " + words[3]) or missing()
elif cmd.startswith("run jobs replace "):
    name = re.search(r"^  name: (\S+)$", open(words[3]).read(), re.M).group(1)
    shutil.copy(words[3], os.path.join(state_dir, name + ".yaml"))
    add("job " + name)
elif cmd.startswith("scheduler jobs describe "):
    has("trigger " + words[3]) or missing()
elif cmd.startswith("scheduler jobs create http ") or cmd.startswith("scheduler jobs update http "):
    has("trigger " + words[4]) != cmd.startswith("scheduler jobs create") or sys.exit("create of an existing trigger, or update of a missing one")
    add("trigger " + words[4])
elif cmd in ("alpha monitoring policies list", "monitoring dashboards list"):
    dn = re.fullmatch(r'displayName="(.*)"', flags["filter"]).group(1)
    if has("monitoring " + dn):
        print("projects/p/x/" + str(abs(hash(dn))))
elif cmd == "alpha monitoring policies create" or cmd == "monitoring dashboards create":
    f = flags.get("policy-from-file") or flags["config-from-file"]
    add("monitoring " + json.load(open(f))["displayName"])
else:
    sys.exit("fake gcloud: unexpected command: " + shlex.join(args))
`

// summaryLines are the lines of bootstrap.sh's closing summary.
func summaryLines(out string) []string {
	_, after, _ := strings.Cut(out, "bootstrap: summary")
	var lines []string
	for l := range strings.Lines(after) {
		if strings.HasPrefix(l, "  ") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	return lines
}

// Against a gcloud that stands in for an empty project, a first run
// creates every resource, and a second run creates nothing: it asks, finds
// each resource there and prints "unchanged", re-applying only what is
// idempotent (the jobs' replace, the trigger's update, the index
// overrides). The daily job and the trigger share the --time-zone given.
func TestBootstrapIdempotent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs bootstrap.sh twice against a fake gcloud in python3: skipped in -short mode")
	}
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("bootstrap.sh needs python3 (and so does this test's gcloud)")
	}
	bin, dir := fakeBin(t, fakeGcloud)
	args := append(slices.Clone(required), "--time-zone", "America/New_York")
	mutating := regexp.MustCompile(`^gcloud (.* )?(create|enable|add-iam-policy-binding|submit|update|replace)( |$)`)

	code, out, errs := bootstrap(t, bin, dir, args...)
	if code != 0 {
		t.Fatalf("first run: exit %d\n%s%s", code, out, errs)
	}
	first := calls(t, dir)
	firstSummary := summaryLines(out)
	created := 0
	for _, l := range firstSummary {
		if strings.HasSuffix(l, " created") {
			created++
		} else if !strings.HasSuffix(l, "(idempotent)") {
			t.Errorf("first run, on an empty project: %q", l)
		}
	}
	if created < 25 {
		t.Errorf("first run created %d resources:\n%s", created, out)
	}
	for _, want := range []string{"gcloud services enable ", "gcloud artifacts repositories create snapwriter ",
		"gcloud firestore databases create ", "gcloud iam service-accounts create snapwriter ",
		"gcloud iam service-accounts create snapwriter-scheduler ", "gcloud builds submit ",
		"gcloud scheduler jobs create http snapwriter-daily ", "gcloud monitoring dashboards create "} {
		if !slices.ContainsFunc(first, func(c string) bool { return strings.HasPrefix(c, want) }) {
			t.Errorf("first run: no %s…", want)
		}
	}
	if n := len(slices.DeleteFunc(slices.Clone(first), func(c string) bool { return !strings.HasPrefix(c, "gcloud alpha monitoring policies create ") })); n != 3 {
		t.Errorf("first run created %d alert policies, want 3", n)
	}
	daily := readJob(t, filepath.Join(dir, "snapwriter-daily.yaml"))
	args0 := containerNamed(t, daily, "snapwriter").Args
	if i := slices.Index(args0, "--timezone"); i < 0 || args0[i+1] != "America/New_York" {
		t.Errorf("the daily job was deployed with %v, want --timezone America/New_York", args0)
	}
	if img := containerNamed(t, daily, "snapwriter").Image; img != "europe-west3-docker.pkg.dev/test-proj1/snapwriter/snapwriter:t1" {
		t.Errorf("the daily job's image %s", img)
	}
	if !slices.ContainsFunc(first, func(c string) bool {
		return strings.HasPrefix(c, "gcloud scheduler jobs create http") && strings.Contains(c, "--time-zone=America/New_York")
	}) {
		t.Error("the trigger was not created with --time-zone=America/New_York")
	}

	code, out, errs = bootstrap(t, bin, dir, args...)
	if code != 0 {
		t.Fatalf("second run: exit %d\n%s%s", code, out, errs)
	}
	second := calls(t, dir)[len(first):]
	for _, c := range second {
		if !mutating.MatchString(c) {
			continue
		}
		// What is applied again: its result is the same.
		if strings.HasPrefix(c, "gcloud run jobs replace ") || strings.HasPrefix(c, "gcloud scheduler jobs update http ") ||
			strings.HasPrefix(c, "gcloud firestore indexes ") {
			continue
		}
		t.Errorf("second run changed something: %s", c)
	}
	lines := summaryLines(out)
	if len(lines) != len(firstSummary) {
		t.Errorf("second run's summary has %d lines, the first's %d", len(lines), len(firstSummary))
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, " unchanged") && !strings.HasSuffix(l, "(idempotent)") {
			t.Errorf("second run: %q", l)
		}
	}
}
