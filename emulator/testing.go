package emulator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	vkit "cloud.google.com/go/firestore/apiv1"
	"google.golang.org/grpc"

	"github.com/snapwriter/snapwriter/internal/harness"
)

// Main runs a package's tests against one emulator: it reuses the one named
// by FIRESTORE_EMULATOR_HOST (as `make test` provides) or starts its own, and
// stores it in *emu for the tests. Use it from TestMain:
//
//	var emu *emulator.Emulator
//	func TestMain(m *testing.M) { os.Exit(emulator.Main(m, &emu)) }
//
// A package whose tests need the emulator fails, never skips, when none can
// be started.
//
// In -short mode (make test-short) Main starts no emulator and leaves *emu
// nil: the tests that reach the emulator through ProjectID, TestClient,
// TestClientFor or TestAPIClient are skipped there, and a test that reaches
// it otherwise (emu.Host, emu.Dial) calls SkipShort first.
func Main(m *testing.M, emu **Emulator) int {
	// TestMain runs before the test flags are parsed; -short is one.
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	e, err := Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: cannot start the Firestore emulator:", err)
		return 1
	}
	*emu = e
	defer e.Stop()
	// Code under test that finds Firestore by itself, as the Firestore
	// client does, must find this emulator too.
	if os.Getenv(HostEnv) != e.Host {
		os.Setenv(HostEnv, e.Host)
	}
	return m.Run()
}

// SkipShort skips t in -short mode, where Main starts no emulator. The
// harness's own calls (ProjectID, TestClient, …) do it; a test that reaches
// the emulator otherwise, through emu.Host or emu.Dial, calls it first:
//
//	func TestRoundTrips(t *testing.T) {
//		emulator.SkipShort(t)
//		conn, err := grpc.NewClient(emu.Host, …)
//
// Without -short it does nothing; every test runs.
func SkipShort(t testing.TB) {
	t.Helper()
	harness.SkipShort(t, "the Firestore emulator")
}

var unsafeID = regexp.MustCompile(`[^a-z0-9-]+`)

// ProjectID returns a project id unique to this test run, so tests sharing
// one emulator never see each other's documents. In -short mode it skips
// t.
func ProjectID(t testing.TB) string {
	t.Helper()
	SkipShort(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.Trim(unsafeID.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(name) > 40 {
		name = name[:40]
	}
	return "t-" + name + "-" + hex.EncodeToString(b[:])
}

// TestClient returns a client on a fresh project for t, closed when t ends.
func (e *Emulator) TestClient(t testing.TB, interceptors ...grpc.UnaryClientInterceptor) *firestore.Client {
	t.Helper()
	return e.TestClientFor(t, ProjectID(t), interceptors...)
}

// TestAPIClient returns a Firestore API client (the low-level one
// snapshot.WithAPIClient takes) on this emulator with the given
// interceptors, closed when t ends. Its requests name their project.
func (e *Emulator) TestAPIClient(t testing.TB, interceptors ...grpc.UnaryClientInterceptor) *vkit.Client {
	t.Helper()
	SkipShort(t)
	c, err := e.APIClient(context.Background(), interceptors...)
	if err != nil {
		t.Fatalf("emulator API client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestClientFor is TestClient for a given project, so several clients (for
// instance one with injected faults and one without) can share data.
func (e *Emulator) TestClientFor(t testing.TB, project string, interceptors ...grpc.UnaryClientInterceptor) *firestore.Client {
	t.Helper()
	SkipShort(t)
	c, err := e.Client(context.Background(), project, interceptors...)
	if err != nil {
		t.Fatalf("emulator client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
