package main

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/snapwriter/snapwriter/backfill"
	"github.com/snapwriter/snapwriter/snapshot"
)

// jobArgs reads the args of the snapwriter container of the Cloud Run job
// in deploy/name, BUCKET replaced by the test's bucket.
func jobArgs(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile("../../deploy/" + name)
	if err != nil {
		t.Fatal(err)
	}
	y := string(b)
	// A Cloud Storage FUSE volume lists no folder that exists only as a
	// prefix — every folder the application uploads — without implicit-dirs.
	if strings.Contains(y, "gcsfuse") && !strings.Contains(y, "implicit-dirs") {
		t.Errorf("%s mounts the bucket without implicit-dirs", name)
	}
	var job struct {
		Spec struct {
			Template struct {
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct {
								Name string
								Args []string
							}
						}
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(b, &job); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, c := range job.Spec.Template.Spec.Template.Spec.Containers {
		if c.Name != "snapwriter" {
			continue
		}
		args := slices.Clone(c.Args)
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "BUCKET", gcsBucket)
		}
		return args
	}
	t.Fatalf("%s: no container named snapwriter", name)
	return nil
}

// jobToday is today's date where the job's "today" is: in its --timezone
// (default UTC).
func jobToday(t *testing.T, args []string, daysAgo int) string {
	t.Helper()
	loc := time.UTC
	if i := slices.Index(args, "--timezone"); i >= 0 {
		var err error
		if loc, err = time.LoadLocation(args[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	return time.Now().In(loc).AddDate(0, 0, -daysAgo).Format(time.DateOnly)
}

// The backfill job of deploy/job.yaml, run as its four Cloud Run tasks,
// writes every complete folder of the bucket once, and a folder still
// uploading is not-ready: its task exits 7, to be retried.
func TestDeployBackfillJob(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	g := newGCS(t, c)
	dates := []string{"2026-11-17", "2026-11-18", "2026-11-19", "2026-11-20", "2026-11-21"}
	for _, d := range dates {
		g.folder(t, d, 3)
	}
	g.unfinish("2026-11-21")
	args := jobArgs(t, "job.yaml")
	c.env["CLOUD_RUN_TASK_COUNT"] = "4"
	for i := range 4 {
		c.env["CLOUD_RUN_TASK_INDEX"] = strconv.Itoa(i)
		code, out, errs := c.run("", args...)
		want := exitOK
		if backfill.ShardOf("2026-11-21", 4) == i {
			want = exitNotReady
		}
		if code != want {
			t.Errorf("task %d: exit %d, want %d\n%s%s", i, code, want, out, errs)
		}
	}
	st := stateOf(t, c.project)
	for _, d := range dates[:4] {
		if st[d].State != "complete" {
			t.Errorf("%s: %+v", d, st[d])
		}
	}
	if _, ok := st["2026-11-21"]; ok {
		t.Error("a folder still uploading was written")
	}
}

// The daily job of deploy/daily-job.yaml writes today's folder (today in
// its --timezone, the trigger's), and a second run the same day is a
// no-op.
func TestDeployDailyJob(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	g := newGCS(t, c)
	args := jobArgs(t, "daily-job.yaml")
	today := jobToday(t, args, 0)
	g.folder(t, today, 4)
	for run := range 2 {
		if code, out, errs := c.run("", args...); code != exitOK {
			t.Fatalf("run %d: exit %d\n%s%s", run, code, out, errs)
		}
	}
	if st := stateOf(t, c.project); st[today].State != "complete" || st[today].Districts != 4 {
		t.Errorf("stored %+v", st)
	}
}

// The daily job is gated: a day whose folder has fewer districts than the
// day before is held — exit 8, one ERROR line, nothing written.
func TestDeployDailyJobGate(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	g := newGCS(t, c)
	args := jobArgs(t, "daily-job.yaml")
	today, yesterday := jobToday(t, args, 0), jobToday(t, args, 1)
	if code, _, errs := c.run(genJSON(t, yesterday, 4), "write", "--input", "-"); code != exitOK {
		t.Fatalf("yesterday: exit %d\n%s", code, errs)
	}
	g.folder(t, today, 3)
	code, out, errs := c.run("", args...)
	if code != exitHeld || errorLines(errs) != 1 || !strings.Contains(out, "held") {
		t.Fatalf("exit %d, want %d (held)\n%s%s", code, exitHeld, out, errs)
	}
	if st := stateOf(t, c.project); len(st) != 1 {
		t.Errorf("stored %+v, want yesterday alone", st)
	}
}

// deploy/gate-alert.json is a Cloud Monitoring alert policy on the metric
// a held write counts, firing above 0 and left open while no run reports
// (so that the next run that passes, which adds 0, closes it); its
// runbook's log query finds the ERROR line a held write logs.
func TestDeployGateAlert(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../deploy/gate-alert.json")
	if err != nil {
		t.Fatal(err)
	}
	var policy struct {
		Documentation struct{ Content string }
		Conditions    []struct {
			ConditionThreshold struct {
				Filter                string
				Comparison            string
				ThresholdValue        float64
				EvaluationMissingData string
				Aggregations          []struct{ PerSeriesAligner string }
			}
		}
	}
	if err := json.Unmarshal(b, &policy); err != nil || len(policy.Conditions) != 1 {
		t.Fatalf("policy: %v, %d conditions", err, len(policy.Conditions))
	}
	c := policy.Conditions[0].ConditionThreshold
	if c.Filter != `metric.type = "workload.googleapis.com/`+snapshot.MetricGateHeld+`"` || c.Comparison != "COMPARISON_GT" || c.ThresholdValue != 0 ||
		c.EvaluationMissingData != "EVALUATION_MISSING_DATA_NO_OP" || len(c.Aggregations) != 1 || c.Aggregations[0].PerSeriesAligner != "ALIGN_DELTA" {
		t.Errorf("condition %+v", c)
	}
	m := regexp.MustCompile(`jsonPayload\.message=~"([^"\\]+)`).FindStringSubmatch(policy.Documentation.Content)
	if m == nil {
		t.Fatalf("the runbook has no log query:\n%s", policy.Documentation.Content)
	}
	cl := newCLI(t)
	if code, _, errs := cl.run(genJSON(t, "2026-11-19", 3), "write", "--input", "-"); code != exitOK {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	_, _, errs := cl.run(genJSON(t, day, 2), "write", "--input", "-", "--gate")
	if !regexp.MustCompile(`"severity":"ERROR"[^\n]*"message":"[^"]*` + regexp.QuoteMeta(m[1])).MatchString(errs) {
		t.Errorf("no ERROR line matches the runbook's query %q:\n%s", m[1], errs)
	}
}

// dockerStage is one stage of a Dockerfile: its FROM line and the
// instructions after it, continuation lines joined and comments dropped.
type dockerStage struct {
	from  string
	instr []string
}

// dockerStages reads ../../Dockerfile into its stages.
func dockerStages(t *testing.T) []dockerStage {
	t.Helper()
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var stages []dockerStage
	var cur string
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if cur == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if rest, ok := strings.CutSuffix(line, `\`); ok {
			cur += rest + " "
			continue
		}
		cur += line
		switch {
		case strings.HasPrefix(cur, "FROM "):
			stages = append(stages, dockerStage{from: cur})
		case len(stages) == 0:
			// ARGs before the first FROM: none here.
			t.Fatalf("Dockerfile: %q before the first FROM", cur)
		default:
			stages[len(stages)-1].instr = append(stages[len(stages)-1].instr, cur)
		}
		cur = ""
	}
	if len(stages) != 2 {
		t.Fatalf("Dockerfile has %d stages; want the build stage and the image", len(stages))
	}
	return stages
}

// The image is for the platform asked for (Cloud Run runs only
// linux/amd64), cross-compiled on the builder's: the build stage runs on
// $BUILDPLATFORM and builds for TARGETOS/TARGETARCH, the final stage is the
// target's. It carries the OCI labels, revision and version from the build
// arguments; deploy/cloudbuild.yaml builds it with BuildKit for
// linux/amd64.
func TestDockerfilePlatformAndLabels(t *testing.T) {
	t.Parallel()
	stages := dockerStages(t)
	build, image := stages[0], stages[1]
	if !strings.HasPrefix(build.from, "FROM --platform=$BUILDPLATFORM golang:") {
		t.Errorf("build stage %q: want FROM --platform=$BUILDPLATFORM golang:…", build.from)
	}
	if strings.Contains(image.from, "--platform") {
		t.Errorf("final stage %q: must be the target platform's, without --platform", image.from)
	}
	args := map[string]int{} // ARG name → index of its instruction in the build stage
	goBuild := -1
	for i, in := range build.instr {
		if names, ok := strings.CutPrefix(in, "ARG "); ok {
			for _, n := range strings.Fields(names) {
				args[strings.SplitN(n, "=", 2)[0]] = i
			}
		}
		if strings.Contains(in, "go build") && strings.Contains(in, "./cmd/snapwriter") {
			goBuild = i
		}
	}
	if goBuild < 0 {
		t.Fatal("build stage: no go build of ./cmd/snapwriter")
	}
	for _, a := range []string{"TARGETOS", "TARGETARCH", "REVISION", "VERSION"} {
		if i, ok := args[a]; !ok || i > goBuild {
			t.Errorf("build stage: ARG %s not declared before the go build (an undeclared one is empty there)", a)
		}
	}
	run := build.instr[goBuild]
	for _, want := range []string{"CGO_ENABLED=0", "GOOS=$TARGETOS", "GOARCH=$TARGETARCH", "buildinfo.revision=${REVISION}", "buildinfo.version=${VERSION}"} {
		if !strings.Contains(run, want) {
			t.Errorf("build stage's go build lacks %s: %s", want, run)
		}
	}

	labels := map[string]string{}
	imageArgs := map[string]bool{}
	label := regexp.MustCompile(`(\S+?)="([^"]*)"`)
	for _, in := range image.instr {
		if rest, ok := strings.CutPrefix(in, "LABEL "); ok {
			for _, m := range label.FindAllStringSubmatch(rest, -1) {
				labels[m[1]] = m[2]
			}
		}
		if names, ok := strings.CutPrefix(in, "ARG "); ok {
			for _, n := range strings.Fields(names) {
				imageArgs[strings.SplitN(n, "=", 2)[0]] = true
			}
		}
	}
	const oci = "org.opencontainers.image."
	want := map[string]string{
		oci + "title":    "snapwriter",
		oci + "source":   "https://github.com/snapwriter/snapwriter",
		oci + "licenses": "Apache-2.0",
		oci + "revision": "${REVISION}",
		oci + "version":  "${VERSION}",
	}
	for k, v := range want {
		if labels[k] != v {
			t.Errorf("label %s = %q; want %q", k, labels[k], v)
		}
	}
	for _, k := range []string{oci + "description", oci + "documentation"} {
		if labels[k] == "" {
			t.Errorf("label %s missing or empty", k)
		}
	}
	// A build argument is empty in a stage that does not declare it.
	for _, a := range []string{"REVISION", "VERSION"} {
		if !imageArgs[a] {
			t.Errorf("final stage: ARG %s not declared, so its label would be empty", a)
		}
	}
	if lic, err := os.ReadFile("../../LICENSE"); err != nil || !strings.Contains(string(lic), "Apache License") || !strings.Contains(string(lic), "Version 2.0, January 2004") {
		t.Errorf("LICENSE is not the Apache License 2.0 the image's label names (%v)", err)
	}

	cb, err := os.ReadFile("../../deploy/cloudbuild.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- --platform=linux/amd64", "- DOCKER_BUILDKIT=1", "- --build-arg=REVISION=${_REVISION}", "- --build-arg=VERSION=${_VERSION}"} {
		if !strings.Contains(string(cb), want) {
			t.Errorf("deploy/cloudbuild.yaml lacks %q", want)
		}
	}
}
