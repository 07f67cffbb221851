package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"

	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/snapwriter/snapwriter/snapshot"
)

// otlpCollector is an OTLP/HTTP endpoint keeping the spans and metric
// names it receives.
type otlpCollector struct {
	*httptest.Server
	mu      sync.Mutex
	spans   []*tracepb.Span
	metrics map[string]bool
}

func newOTLPCollector(t *testing.T) *otlpCollector {
	c := &otlpCollector{metrics: map[string]bool{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		defer c.mu.Unlock()
		switch r.URL.Path {
		case "/v1/traces":
			var req colltrace.ExportTraceServiceRequest
			if err := proto.Unmarshal(body, &req); err != nil {
				t.Errorf("decoding a trace export: %v", err)
			}
			for _, rs := range req.GetResourceSpans() {
				for _, ss := range rs.GetScopeSpans() {
					c.spans = append(c.spans, ss.GetSpans()...)
				}
			}
		case "/v1/metrics":
			var req collmetrics.ExportMetricsServiceRequest
			if err := proto.Unmarshal(body, &req); err != nil {
				t.Errorf("decoding a metrics export: %v", err)
			}
			for _, rm := range req.GetResourceMetrics() {
				for _, sm := range rm.GetScopeMetrics() {
					for _, m := range sm.GetMetrics() {
						c.metrics[m.GetName()] = true
					}
				}
			}
		}
	}))
	t.Cleanup(c.Close)
	return c
}

// named are the spans received named name.
func (c *otlpCollector) named(name string) []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range c.spans {
		if s.GetName() == name {
			out = append(out, s)
		}
	}
	return out
}

// spanAttr is span s's string attribute key.
func spanAttr(s *tracepb.Span, key string) string {
	for _, a := range s.GetAttributes() {
		if a.GetKey() == key {
			return a.GetValue().GetStringValue()
		}
	}
	return ""
}

func otelEnv(endpoint string) []string {
	return []string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_METRICS_EXPORTER=otlp",
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint}
}

// The built binary, with OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER
// set, exports the write's trace — the Firestore client's spans nested in
// it — and its metrics over OTLP/HTTP before it exits, and its log lines
// name the trace.
func TestBinaryExportsTelemetry(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	col := newOTLPCollector(t)
	file := writeFile(t, day+".json", genJSON(t, day, 120))
	cmd := exec.Command(binary(t), "write", "--input", file)
	cmd.Env = binaryEnv(c.project, otelEnv(col.URL)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("write: %v\n%s", err, stderr.String())
	}
	writes := col.named("snapwriter.write")
	if len(writes) != 1 {
		t.Fatalf("%d write spans received, want 1", len(writes))
	}
	w := writes[0]
	if spanAttr(w, "snapwriter.outcome") != "complete" || spanAttr(w, "snapwriter.snapshot.id") != day {
		t.Errorf("write span attributes %v", w.GetAttributes())
	}
	if n := len(col.named("snapwriter.chunk")); n != 3 {
		t.Errorf("%d chunk spans received, want 3", n)
	}
	nested := 0
	col.mu.Lock()
	for _, s := range col.spans {
		if strings.HasPrefix(s.GetName(), "cloud.google.com/go/firestore.") && bytes.Equal(s.GetTraceId(), w.GetTraceId()) {
			nested++
		}
	}
	for _, m := range []string{"snapwriter.districts.written", "snapwriter.chunk.commit.duration", "snapwriter.writes", "snapwriter.write.duration", "snapwriter.lock.wait.duration"} {
		if !col.metrics[m] {
			t.Errorf("metric %s not received (got %v)", m, col.metrics)
		}
	}
	col.mu.Unlock()
	if nested == 0 {
		t.Error("no Firestore client span in the write's trace")
	}
	trace := "projects/" + c.project + "/traces/" + hexID(w.GetTraceId())
	linked := 0
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["logging.googleapis.com/trace"] == trace {
			linked++
		}
	}
	if linked == 0 {
		t.Errorf("no log line names the trace %s", trace)
	}
}

// hexID is a trace id as Cloud Logging spells it.
func hexID(b []byte) string { return hex.EncodeToString(b) }

// An OpenTelemetry configuration the binary cannot follow is a usage
// error: exit 2, before anything is written.
func TestBinaryBadTelemetryConfig(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	file := writeFile(t, day+".json", genJSON(t, day, 5))
	cmd := exec.Command(binary(t), "write", "--input", file)
	cmd.Env = binaryEnv(c.project, "OTEL_TRACES_EXPORTER=zipkin")
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != exitUsage || !strings.Contains(string(out), "OTEL_TRACES_EXPORTER") {
		t.Fatalf("exit %d (%v), want 2 naming OTEL_TRACES_EXPORTER:\n%s", code, err, out)
	}
	if roots := docsIn(t, c, snapshot.DefaultCollection); len(roots) != 0 {
		t.Errorf("written: %v", roots)
	}
}

// A run ended by SIGTERM still exports its trace before it exits: the
// write's span, partial, with the kind its exit code 3 comes from.
func TestBinaryFlushesTelemetryOnSIGTERM(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	col := newOTLPCollector(t)
	file := writeFile(t, day+".json", genJSON(t, day, 1000))
	cmd := exec.Command(binary(t), "write", "--input", file, "--concurrency", "1")
	cmd.Env = binaryEnv(c.project, otelEnv(col.URL)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	sc := bufio.NewScanner(io.TeeReader(stderr, &logs))
	for sc.Scan() && !strings.Contains(sc.Text(), `"message":"batch committed"`) {
	}
	if code := sigterm(t, cmd, stderr, &logs); code != exitPartial {
		t.Fatalf("exit %d, want 3\n%s", code, logs.String())
	}
	writes := col.named("snapwriter.write")
	if len(writes) != 1 {
		t.Fatalf("%d write spans received, want 1\n%s", len(writes), logs.String())
	}
	if w := writes[0]; spanAttr(w, "error.type") != "Partial" || spanAttr(w, "snapwriter.outcome") != "partial" {
		t.Errorf("write span attributes %v", w.GetAttributes())
	}
	if len(col.named("snapwriter.lock.release")) != 1 {
		t.Error("the lock's release was not exported")
	}
}
