// Package otlptest is an OTLP/HTTP collector for tests: an httptest.Server
// that keeps the spans, metric names and resources exported to it, so
// that a test can check what a program sends over the wire. It is meant
// for tests only.
package otlptest

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Collector is an OTLP/HTTP endpoint (/v1/traces, /v1/metrics; its URL is
// what OTEL_EXPORTER_OTLP_ENDPOINT names) that keeps what it receives and
// answers as a collector does. An export it cannot read, or to another
// path, fails the test. It is safe for concurrent use; its methods return
// copies of what it has received so far.
type Collector struct {
	*httptest.Server

	mu       sync.Mutex
	requests int               // exports received, to any path
	spans    []*tracepb.Span   // in the order received
	metrics  []string          // metric names, in the order received
	services []string          // service.name of each resource received
	attrs    map[string]string // resource attributes received, the last value of each key
}

// NewCollector starts a Collector, closed when t's test ends.
func NewCollector(t testing.TB) *Collector {
	c := &Collector{attrs: map[string]string{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.serve(t, w, r)
	}))
	t.Cleanup(c.Close)
	return c
}

// serve records one export and answers it with the response the OTLP
// specification gives for it.
func (c *Collector) serve(t testing.TB, w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Errorf("reading an export: %v", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests++
	switch r.URL.Path {
	case "/v1/traces":
		var req colltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("decoding a trace export: %v", err)
		}
		for _, rs := range req.GetResourceSpans() {
			c.resource(rs.GetResource())
			for _, ss := range rs.GetScopeSpans() {
				c.spans = append(c.spans, ss.GetSpans()...)
			}
		}
		c.answer(t, w, &colltrace.ExportTraceServiceResponse{})
	case "/v1/metrics":
		var req collmetrics.ExportMetricsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("decoding a metrics export: %v", err)
		}
		for _, rm := range req.GetResourceMetrics() {
			c.resource(rm.GetResource())
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					c.metrics = append(c.metrics, m.GetName())
				}
			}
		}
		c.answer(t, w, &collmetrics.ExportMetricsServiceResponse{})
	default:
		t.Errorf("export to unexpected path %s", r.URL.Path)
		w.WriteHeader(http.StatusNotFound)
	}
}

// resource records the attributes of an export's resource. c.mu is held.
func (c *Collector) resource(res *resourcepb.Resource) {
	for _, a := range res.GetAttributes() {
		c.attrs[a.GetKey()] = a.GetValue().GetStringValue()
		if a.GetKey() == "service.name" {
			c.services = append(c.services, a.GetValue().GetStringValue())
		}
	}
}

// answer writes resp, protobuf-encoded, as the body of a successful
// export's response.
func (c *Collector) answer(t testing.TB, w http.ResponseWriter, resp proto.Message) {
	b, err := proto.Marshal(resp)
	if err != nil {
		t.Errorf("encoding an export's response: %v", err)
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

// Requests is the number of exports received, to any path.
func (c *Collector) Requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests
}

// Spans are the spans received, in the order they arrived. The slice is
// a copy; the spans are the decoded ones, which the Collector does not
// change after it records them.
func (c *Collector) Spans() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.spans)
}

// Named are the spans received whose name is name, in the order they
// arrived.
func (c *Collector) Named(name string) []*tracepb.Span {
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

// MetricNames are the names of the metrics received, in the order they
// arrived, once for each export that carried them.
func (c *Collector) MetricNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.metrics)
}

// ServiceNames are the service.name of each resource received, trace and
// metric exports alike, in the order they arrived.
func (c *Collector) ServiceNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.services)
}

// ResourceAttributes are the string attributes of the resources
// received: for a key that several resources carry, the value of the
// last.
func (c *Collector) ResourceAttributes() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.attrs)
}
