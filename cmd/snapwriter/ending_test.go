package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/spf13/cobra"

	"github.com/snapwriter/snapwriter/internal/harness"
	"github.com/snapwriter/snapwriter/internal/safego"
	"github.com/snapwriter/snapwriter/internal/signals"
)

// signalled is a context a signal ended, as main's signals.NotifyContext
// ends it.
func signalled(sig syscall.Signal) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(signals.Stopped{Signal: sig})
	return ctx
}

// runHooked runs a command line in process with no Firestore, under ctx,
// with hook (if not nil) as the app's beforeRun.
func runHooked(ctx context.Context, hook func(*cobra.Command), args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	a := newApp(strings.NewReader(""), &out, &errb, func(string) (string, bool) { return "", false })
	a.beforeRun = hook
	code := a.run(ctx, args)
	return code, out.String(), errb.String()
}

// Any command a signal stopped exits 128+n and says why it ended: here
// list, which the signal ended before it connected (whatever the error it
// saw then: no credentials here, a cancelled dial elsewhere). A command that had finished its work
// (version) exits as it finished.
func TestSignalExitCode(t *testing.T) {
	t.Parallel()
	for sig, want := range map[syscall.Signal]int{syscall.SIGINT: 130, syscall.SIGTERM: 143} {
		code, _, errs := runHooked(signalled(sig), nil, "list", "--project", "p")
		if code != want || !strings.HasPrefix(errs, "snapwriter: ") {
			t.Errorf("list after %s: exit %d, want %d\nstderr %q", signals.Name(sig), code, want, errs)
		}
		code, out, errs := runHooked(signalled(sig), nil, "version")
		if code != exitOK || !strings.HasPrefix(out, "snapwriter ") {
			t.Errorf("version, done, after %s: exit %d, want 0\nstdout %q\nstderr %q", signals.Name(sig), code, out, errs)
		}
	}
	// Cancelled without a signal (a library's own end): not 130/143.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code, _, errs := runHooked(ctx, nil, "version"); code != exitOK {
		t.Errorf("version with a context cancelled without a signal: exit %d\n%s", code, errs)
	}
}

// A command that panics exits 1 (never 2, the runtime's code and the
// CLI's for usage), says so on stderr, and logs the stack at ERROR.
func TestPanicExitsOne(t *testing.T) {
	t.Parallel()
	hook := func(cmd *cobra.Command) {
		if cmd.Name() == "list" {
			noMap()["x"]++ // a runtime error, as a bug would be
		}
	}
	code, _, errs := runHooked(context.Background(), hook, "list", "--log-format", "json")
	if code != exitError {
		t.Fatalf("exit %d, want 1\n%s", code, errs)
	}
	if !strings.Contains(errs, "snapwriter: internal error (a bug; please report it with the log): panic: assignment to entry in nil map") {
		t.Errorf("stderr does not say what panicked:\n%s", errs)
	}
	line := panicLine(t, errs)
	if !strings.Contains(line["stack"].(string), "ending_test.go") {
		t.Errorf("the logged stack does not reach the panic:\n%s", line["stack"])
	}
	// A panic signalled or not is a panic: 1.
	if code, _, errs := runHooked(signalled(syscall.SIGTERM), hook, "list"); code != exitError {
		t.Errorf("panic after SIGTERM: exit %d\n%s", code, errs)
	}
}

// A panic in a goroutine of the command (an errgroup's, through safego)
// reaches app.run too: exit 1. The batch of chunks is one.
func TestPanicInGoroutineExitsOne(t *testing.T) {
	t.Parallel()
	hook := func(cmd *cobra.Command) {
		var wg sync.WaitGroup
		var err error
		wg.Go(func() { err = safego.Func(func() error { panic("from a goroutine") })() })
		wg.Wait()
		safego.Repanic(err)
	}
	code, _, errs := runHooked(context.Background(), hook, "list", "--log-format", "json")
	if code != exitError || !strings.Contains(errs, "panic: from a goroutine") {
		t.Fatalf("exit %d, want 1\n%s", code, errs)
	}
	panicLine(t, errs)
}

// panicLine is the ERROR log line of a panic in stderr.
func panicLine(t *testing.T, stderr string) map[string]any {
	t.Helper()
	for l := range strings.Lines(stderr) {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["message"] == "internal error: panic" {
			if m["severity"] != "ERROR" || m["stack"] == nil {
				t.Errorf("panic line %v: want severity ERROR and a stack", m)
			}
			return m
		}
	}
	t.Fatalf("no log line of the panic:\n%s", stderr)
	return nil
}

// The built binary, with the test-only hook (-tags snapwriter_testhooks):
// a command that panics exits 1 with the stack in its log.
func TestBinaryPanicExitsOne(t *testing.T) {
	t.Parallel()
	bin := binaryTagged(t, "snapwriter_testhooks")
	cmd := exec.Command(bin, "list", "--log-format", "json")
	cmd.Env = append(binaryEnv("p"), "SNAPWRITER_TESTHOOK_PANIC=list")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != exitError {
		t.Fatalf("exit %d (%v), want 1\n%s", code, err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "internal error (a bug; please report it with the log): panic: test hook: list panics") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	if line := panicLine(t, stderr.String()); !strings.Contains(line["stack"].(string), "testhooks_on.go") {
		t.Errorf("stack:\n%s", line["stack"])
	}
	// The product's binary has no such hook.
	plain := exec.Command(binary(t), "version")
	plain.Env = append(binaryEnv("p"), "SNAPWRITER_TESTHOOK_PANIC=version")
	if out, err := plain.CombinedOutput(); err != nil {
		t.Errorf("the product binary honoured the test hook: %v\n%s", err, out)
	}
}

// binaryTagged builds the snapwriter binary with the build tags given, for
// the one test that needs it, into the test's directory.
func binaryTagged(t *testing.T, tags string) string {
	t.Helper()
	harness.SkipShort(t, "the built snapwriter binary")
	path := filepath.Join(t.TempDir(), "snapwriter")
	if out, err := exec.Command("go", "build", "-tags", tags, "-o", path, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %s: %v\n%s", tags, err, out)
	}
	return path
}

// noMap is a nil map, to write into by mistake.
func noMap() map[string]int { return nil }

// A report states the code the process ends with: 128+n for a run a
// signal stopped short of its work, the run's own 0 for one that had
// finished it, and the run's code when no signal came.
func TestSignalExitOfAReport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ctx        context.Context
		code, want int
	}{
		{signalled(syscall.SIGTERM), exitError, 143},
		{signalled(syscall.SIGINT), exitPartial, 130},
		{signalled(syscall.SIGTERM), exitOK, exitOK},
		{context.Background(), exitLockHeld, exitLockHeld},
	} {
		if got := signalExit(tc.ctx, tc.code); got != tc.want {
			t.Errorf("signalExit(signal %d, %d) = %d, want %d", signals.Received(tc.ctx), tc.code, got, tc.want)
		}
	}
}
