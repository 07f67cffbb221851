package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	monitoringv1 "google.golang.org/api/monitoring/v1"
	monitoringv3 "google.golang.org/api/monitoring/v3"
	run "google.golang.org/api/run/v1"

	"github.com/snapwriter/snapwriter/snapshot"
)

// strictJSON decodes b into v, failing on a field v's type does not have:
// a field the API does not know would be refused (or, worse, dropped) by
// it.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the object")
	}
	return nil
}

// apiJSON turns a YAML document's tree into the JSON the API's Go types
// read: the client library spells an int64 field tagged ",string" as a
// JSON string (as the API's JSON does), where YAML has a number.
func apiJSON(v any, t reflect.Type) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := make(map[string]any, len(m))
		for k, x := range m {
			out[k] = x
			for i := range t.NumField() {
				f := t.Field(i)
				tag := strings.Split(f.Tag.Get("json"), ",")
				if tag[0] != k {
					continue
				}
				if slices.Contains(tag[1:], "string") {
					if _, isString := x.(string); !isString {
						out[k] = fmt.Sprint(x)
					}
				} else {
					out[k] = apiJSON(x, f.Type)
				}
			}
		}
		return out
	case reflect.Slice:
		s, ok := v.([]any)
		if !ok {
			return v
		}
		out := make([]any, len(s))
		for i, x := range s {
			out[i] = apiJSON(x, t.Elem())
		}
		return out
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := make(map[string]any, len(m))
		for k, x := range m {
			out[k] = apiJSON(x, t.Elem())
		}
		return out
	}
	return v
}

// readJob reads deploy/name strictly as a Cloud Run Admin API v1 Job.
func readJob(t *testing.T, name string) *run.Job {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var tree any
	if err := yaml.Unmarshal(b, &tree); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	j, err := json.Marshal(apiJSON(tree, reflect.TypeFor[run.Job]()))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var job run.Job
	if err := strictJSON(j, &job); err != nil {
		t.Fatalf("%s is not a Cloud Run v1 Job: %v", name, err)
	}
	return &job
}

// containerNamed is the job's container called name.
func containerNamed(t *testing.T, job *run.Job, name string) *run.Container {
	t.Helper()
	for _, c := range job.Spec.Template.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("job %s has no container %q", job.Metadata.Name, name)
	return nil
}

func envOf(c *run.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}

// Both job YAMLs are Cloud Run v1 Jobs naming only fields the API has, run
// snapwriter as the first container with OTLP going to the collector
// sidecar, start it after the collector, and give the collector the
// configuration of deploy/otel-collector.yaml, which receives OTLP and
// exports to Cloud Monitoring and Cloud Trace.
func TestJobYAMLs(t *testing.T) {
	t.Parallel()
	collector, err := os.ReadFile("otel-collector.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The inline copy is the file without its header comment.
	wantConfig := string(collector[bytes.Index(collector, []byte("receivers:")):])
	var cfg struct {
		Receivers struct {
			OTLP struct {
				Protocols struct {
					HTTP struct{ Endpoint string }
				}
			}
		}
		Service struct {
			Pipelines map[string]struct{ Receivers, Exporters []string }
		}
	}
	if err := yaml.Unmarshal(collector, &cfg); err != nil {
		t.Fatalf("otel-collector.yaml: %v", err)
	}
	if cfg.Receivers.OTLP.Protocols.HTTP.Endpoint != "localhost:4318" {
		t.Errorf("the collector receives OTLP/HTTP on %q, want localhost:4318", cfg.Receivers.OTLP.Protocols.HTTP.Endpoint)
	}
	for _, p := range []string{"traces", "metrics"} {
		pl, ok := cfg.Service.Pipelines[p]
		if !ok || !slices.Equal(pl.Receivers, []string{"otlp"}) || !slices.Equal(pl.Exporters, []string{"googlecloud"}) {
			t.Errorf("collector pipeline %s: %+v, want otlp → googlecloud", p, pl)
		}
	}

	for name, jobName := range map[string]string{"job.yaml": "snapwriter-backfill", "daily-job.yaml": "snapwriter-daily"} {
		job := readJob(t, name)
		if job.Kind != "Job" || job.ApiVersion != "run.googleapis.com/v1" || job.Metadata.Name != jobName {
			t.Errorf("%s: %s %s %q", name, job.ApiVersion, job.Kind, job.Metadata.Name)
		}
		task := job.Spec.Template.Spec.Template.Spec
		if task.ServiceAccountName != "snapwriter@PROJECT_ID.iam.gserviceaccount.com" || task.TimeoutSeconds == 0 {
			t.Errorf("%s: service account %q, timeout %d s", name, task.ServiceAccountName, task.TimeoutSeconds)
		}
		if len(task.Containers) != 2 || task.Containers[0].Name != "snapwriter" {
			t.Fatalf("%s: want snapwriter first, then the collector; got %d containers", name, len(task.Containers))
		}
		sw := envOf(containerNamed(t, job, "snapwriter"))
		for k, v := range map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
			"SNAPWRITER_LOG_FORMAT": "json"} {
			if sw[k] != v {
				t.Errorf("%s: snapwriter's %s = %q, want %q", name, k, sw[k], v)
			}
		}
		col := containerNamed(t, job, "collector")
		if !strings.Contains(col.Image, "/google-cloud-opentelemetry-collector/otelcol-google:") || !slices.Equal(col.Args, []string{"--config=env:OTELCOL_CONFIG"}) {
			t.Errorf("%s: collector %s %v", name, col.Image, col.Args)
		}
		if got := envOf(col)["OTELCOL_CONFIG"]; got != wantConfig {
			t.Errorf("%s: the collector's OTELCOL_CONFIG is not otel-collector.yaml's configuration:\n%s", name, got)
		}
		deps := job.Spec.Template.Metadata.Annotations["run.googleapis.com/container-dependencies"]
		var dm map[string][]string
		if err := json.Unmarshal([]byte(deps), &dm); err != nil || !slices.Equal(dm["snapwriter"], []string{"collector"}) {
			t.Errorf("%s: container dependencies %q (%v), want snapwriter after collector", name, deps, err)
		}
	}
}

// dailyTimezone is the --timezone of the daily job's command line.
func dailyTimezone(t *testing.T) string {
	t.Helper()
	args := containerNamed(t, readJob(t, "daily-job.yaml"), "snapwriter").Args
	i := slices.Index(args, "--timezone")
	if i < 0 || i+1 == len(args) {
		t.Fatalf("daily-job.yaml: no --timezone in %v", args)
	}
	return args[i+1]
}

// The daily job's "today" is the trigger's: its --timezone is
// bootstrap.sh's default --time-zone, the one bootstrap.sh gives the
// trigger (and writes into the job when another is given).
func TestDailyJobTimezoneIsTheTriggers(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("bootstrap.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^default_time_zone=(\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("bootstrap.sh: no default_time_zone=")
	}
	if tz := dailyTimezone(t); tz != string(m[1]) {
		t.Errorf("daily-job.yaml's --timezone %s, bootstrap.sh's default time zone %s", tz, m[1])
	}
}

// metricLabel is a Cloud Monitoring filter's or grouping's metric label.
var metricLabel = regexp.MustCompile(`metric\.labels\.([A-Za-z0-9_]+)`)

// metricType is a filter's metric type.
var metricType = regexp.MustCompile(`metric\.type = "([^"]+)"`)

// productLabels are the Cloud Monitoring label keys of the product's
// metrics: snapwriter's attribute keys (snapshot/telemetry.go) and the
// OpenTelemetry ones it sets, as the collector's googlecloud exporter
// writes them, every character but letters and digits an underscore.
func productLabels(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile("../snapshot/telemetry.go")
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"rpc.response.status_code", "error.type"}
	for _, m := range regexp.MustCompile(`attribute\.Key\("([^"]+)"\)`).FindAllSubmatch(src, -1) {
		keys = append(keys, string(m[1]))
	}
	labels := map[string]bool{}
	for _, k := range keys {
		labels[regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(k, "_")] = true
	}
	return labels
}

// cloudRunJobMetrics are Cloud Run's documented job metrics and their
// metric labels.
var cloudRunJobMetrics = map[string][]string{
	"run.googleapis.com/job/completed_execution_count":    {"result"},
	"run.googleapis.com/job/completed_task_attempt_count": {"result"},
	"run.googleapis.com/job/running_executions":           nil,
	"run.googleapis.com/job/running_task_attempts":        nil,
}

// checkFilter checks that a filter (or the groupings beside it) names only
// the product's metrics and labels, or Cloud Run's job metrics and theirs.
func checkFilter(t *testing.T, where, filter string, groupBy []string) {
	t.Helper()
	product := map[string]bool{}
	for _, n := range []string{snapshot.MetricDistrictsWritten, snapshot.MetricChunkDuration, snapshot.MetricRetries,
		snapshot.MetricContentionWaits, snapshot.MetricLockWait, snapshot.MetricWriteDuration, snapshot.MetricWrites,
		snapshot.MetricWriteRateLimit, snapshot.MetricBudgetWait, snapshot.MetricPushBacks, snapshot.MetricGateHeld} {
		product["workload.googleapis.com/"+n] = true
	}
	types := metricType.FindAllStringSubmatch(filter, -1)
	if len(types) != 1 {
		t.Errorf("%s: filter %q names %d metric types, want 1", where, filter, len(types))
		return
	}
	typ := types[0][1]
	var allowed map[string]bool
	switch jobLabels, isJob := cloudRunJobMetrics[typ]; {
	case product[typ]:
		allowed = productLabels(t)
	case isJob:
		allowed = map[string]bool{}
		for _, l := range jobLabels {
			allowed[l] = true
		}
		if !strings.Contains(filter, `resource.type = "cloud_run_job"`) {
			t.Errorf("%s: %s without resource.type = \"cloud_run_job\"", where, typ)
		}
	default:
		t.Errorf("%s: metric %s is neither the product's (snapshot.Metric…) nor a Cloud Run job metric", where, typ)
		return
	}
	for _, m := range metricLabel.FindAllStringSubmatch(filter+" "+strings.Join(groupBy, " "), -1) {
		if !allowed[m[1]] {
			t.Errorf("%s: %s has no label %s", where, typ, m[1])
		}
	}
}

// The alert policies decode strictly as Cloud Monitoring v3 AlertPolicy
// (the file `gcloud alpha monitoring policies create --policy-from-file`
// takes), each one condition on the product's metrics or Cloud Run's job
// metrics, firing above 0, with a runbook; the partial-write alert counts
// snapwriter.writes whose outcome is partial.
func TestAlertPolicies(t *testing.T) {
	t.Parallel()
	names := map[string]bool{}
	for _, file := range []string{"gate-alert.json", "alert-failed-execution.json", "alert-partial-write.json"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var p monitoringv3.AlertPolicy
		if err := strictJSON(b, &p); err != nil {
			t.Fatalf("%s is not an AlertPolicy: %v", file, err)
		}
		if names[p.DisplayName] || !strings.HasPrefix(p.DisplayName, "snapwriter: ") {
			t.Errorf("%s: display name %q: bootstrap.sh finds a policy by it, so it must be its own", file, p.DisplayName)
		}
		names[p.DisplayName] = true
		if p.Documentation == nil || len(p.Documentation.Content) < 200 || p.Severity != "ERROR" || len(p.Conditions) != 1 {
			t.Fatalf("%s: want a runbook, severity ERROR and one condition", file)
		}
		c := p.Conditions[0].ConditionThreshold
		if c == nil || c.Comparison != "COMPARISON_GT" || c.ThresholdValue != 0 || len(c.Aggregations) != 1 || c.Aggregations[0].PerSeriesAligner != "ALIGN_DELTA" {
			t.Fatalf("%s: condition %+v", file, c)
		}
		checkFilter(t, file, c.Filter, c.Aggregations[0].GroupByFields)
		switch file {
		case "alert-failed-execution.json":
			if !strings.Contains(c.Filter, `metric.labels.result = "failed"`) || !strings.Contains(c.Filter, `resource.labels.job_name = starts_with("snapwriter-")`) {
				t.Errorf("%s: filter %s", file, c.Filter)
			}
		case "alert-partial-write.json":
			want := `metric.type = "workload.googleapis.com/` + snapshot.MetricWrites + `" AND metric.labels.snapwriter_outcome = "` + snapshot.OutcomePartial.String() + `"`
			if c.Filter != want {
				t.Errorf("%s: filter %s, want %s", file, c.Filter, want)
			}
		}
	}
}

// The dashboard decodes strictly as a Cloud Monitoring v1 Dashboard (what
// `gcloud monitoring dashboards create --config-from-file` takes), and its
// charts show only the product's metrics and Cloud Run's job metrics —
// all of them: every one of the product's metrics has a chart.
func TestDashboard(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d monitoringv1.Dashboard
	if err := strictJSON(b, &d); err != nil {
		t.Fatalf("dashboard.json is not a Dashboard: %v", err)
	}
	if d.DisplayName == "" || d.GridLayout == nil || len(d.GridLayout.Widgets) == 0 {
		t.Fatalf("dashboard %q: no widgets", d.DisplayName)
	}
	shown := map[string]bool{}
	for _, w := range d.GridLayout.Widgets {
		if w.XyChart == nil || len(w.XyChart.DataSets) == 0 {
			t.Errorf("widget %q: not a chart", w.Title)
			continue
		}
		for _, ds := range w.XyChart.DataSets {
			f := ds.TimeSeriesQuery.TimeSeriesFilter
			checkFilter(t, "dashboard: "+w.Title, f.Filter, f.Aggregation.GroupByFields)
			for _, m := range metricType.FindAllStringSubmatch(f.Filter, -1) {
				shown[m[1]] = true
			}
		}
	}
	for _, n := range []string{snapshot.MetricDistrictsWritten, snapshot.MetricChunkDuration, snapshot.MetricRetries,
		snapshot.MetricContentionWaits, snapshot.MetricLockWait, snapshot.MetricWriteDuration, snapshot.MetricWrites,
		snapshot.MetricWriteRateLimit, snapshot.MetricBudgetWait, snapshot.MetricPushBacks, snapshot.MetricGateHeld} {
		if !shown["workload.googleapis.com/"+n] {
			t.Errorf("the dashboard has no chart of %s", n)
		}
	}
	if !shown["run.googleapis.com/job/completed_execution_count"] {
		t.Error("the dashboard has no chart of the jobs' executions")
	}
}
