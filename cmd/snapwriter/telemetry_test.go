package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/snapwriter/snapwriter/internal/telemetry/otlptest"
	"github.com/snapwriter/snapwriter/snapshot"
)

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
// set, exports the write's trace — Firestore's calls nested in it — and
// its metrics over OTLP/HTTP before it exits, and its log lines
// name the trace.
func TestBinaryExportsTelemetry(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	col := otlptest.NewCollector(t)
	file := writeFile(t, day+".json", genJSON(t, day, 120))
	cmd := exec.Command(binary(t), "write", "--input", file)
	cmd.Env = binaryEnv(c.project, otelEnv(col.URL)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("write: %v\n%s", err, stderr.String())
	}
	writes := col.Named("snapwriter.write")
	if len(writes) != 1 {
		t.Fatalf("%d write spans received, want 1", len(writes))
	}
	w := writes[0]
	if spanAttr(w, "snapwriter.outcome") != "complete" || spanAttr(w, "snapwriter.snapshot.id") != day {
		t.Errorf("write span attributes %v", w.GetAttributes())
	}
	if n := len(col.Named("snapwriter.chunk")); n != 3 {
		t.Errorf("%d chunk spans received, want 3", n)
	}
	// Firestore's calls in the write's trace: the Firestore client's spans
	// (the progress records' transactions) and the RPCs' own, which
	// OpenTelemetry's gRPC instrumentation records on every connection —
	// the lock's and the chunks' transactions run on the API.
	nested, rpcs := 0, 0
	for _, s := range col.Spans() {
		if !bytes.Equal(s.GetTraceId(), w.GetTraceId()) {
			continue
		}
		switch name := s.GetName(); {
		case strings.HasPrefix(name, "cloud.google.com/go/firestore."):
			nested++
		case strings.HasPrefix(name, "google.firestore.v1.Firestore/"):
			nested++
			if strings.HasSuffix(name, "/Commit") {
				rpcs++
			}
		}
	}
	if rpcs < 4 {
		t.Errorf("%d Firestore Commit RPC spans in the write's trace, want the root's, the 3 chunks' and more", rpcs)
	}
	metrics := col.MetricNames()
	for _, m := range []string{"snapwriter.districts.written", "snapwriter.chunk.commit.duration", "snapwriter.writes", "snapwriter.write.duration", "snapwriter.lock.wait.duration"} {
		if !slices.Contains(metrics, m) {
			t.Errorf("metric %s not received (got %v)", m, metrics)
		}
	}
	if nested == 0 {
		t.Error("no Firestore span in the write's trace")
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
// write's span, partial (the exit code is SIGTERM's 143).
func TestBinaryFlushesTelemetryOnSIGTERM(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	col := otlptest.NewCollector(t)
	file := writeFile(t, day+".json", genJSON(t, day, 1000))
	cmd := exec.Command(binary(t), "write", "--input", file, "--concurrency", "1")
	cmd.Env = binaryEnv(c.project, otelEnv(col.URL)...)
	stderr, sc, logs := startLogged(t, cmd)
	if !scanCommitted(sc, 1) {
		t.Fatalf("the write ended before its root committed:\n%s", logs.String())
	}
	if code := sigterm(t, cmd, stderr, logs); code != 143 {
		t.Fatalf("exit %d, want 143\n%s", code, logs.String())
	}
	writes := col.Named("snapwriter.write")
	if len(writes) != 1 {
		t.Fatalf("%d write spans received, want 1\n%s", len(writes), logs.String())
	}
	if w := writes[0]; spanAttr(w, "error.type") != "Partial" || spanAttr(w, "snapwriter.outcome") != "partial" {
		t.Errorf("write span attributes %v", w.GetAttributes())
	}
	if len(col.Named("snapwriter.lock.release")) != 1 {
		t.Error("the lock's release was not exported")
	}
}
