package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/internal/harness"
)

// built is the snapwriter binary, built once per test run for the tests
// that run it as a process (signals, several tasks at once).
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// binary returns the path of a freshly built snapwriter binary.
func binary(t *testing.T) string {
	t.Helper()
	harness.SkipShort(t, "the built snapwriter binary")
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "snapwriter-bin-")
		if built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "snapwriter")
		built.out, built.err = exec.Command("go", "build", "-o", built.path, ".").CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("go build: %v\n%s", built.err, built.out)
	}
	return built.path
}

// binaryEnv is the environment for a snapwriter process on project.
func binaryEnv(project string, extra ...string) []string {
	return append(append(os.Environ(), "FIRESTORE_EMULATOR_HOST="+emu.Host, "GOOGLE_CLOUD_PROJECT="+project), extra...)
}

// newProject returns a fresh emulator project for t.
func newProject(t *testing.T) string { return emulator.ProjectID(t) }

// startLogged starts cmd with its stderr piped, for a test that waits
// for a log line before it signals the process. It returns the pipe, a
// scanner over it to wait with, and logs, which gets every byte the
// scanner reads, so that a failure can show them; sigterm and stop, given
// stderr and logs, copy the rest into logs.
func startLogged(t *testing.T, cmd *exec.Cmd) (stderr io.Reader, sc *bufio.Scanner, logs *bytes.Buffer) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs = &bytes.Buffer{}
	return stderr, bufio.NewScanner(io.TeeReader(stderr, logs)), logs
}

// scanCommitted reads sc until n "batch committed" log lines have been
// read (the root's commit is one, batch 0), and reports whether they were
// before the output ended.
func scanCommitted(sc *bufio.Scanner, n int) bool {
	for committed := 0; committed < n; {
		if !sc.Scan() {
			return false
		}
		committed += strings.Count(sc.Text(), `"message":"batch committed"`)
	}
	return true
}

// sigterm sends SIGTERM to cmd, copies the rest of its stderr into logs,
// and waits at most 30 s for it to exit; it returns the exit code.
func sigterm(t *testing.T, cmd *exec.Cmd, stderr io.Reader, logs *bytes.Buffer) int {
	t.Helper()
	return stop(t, cmd, syscall.SIGTERM, 30*time.Second, stderr, logs)
}

// stop sends sig to cmd, copies the rest of its stderr into logs, and
// waits at most within for it to exit; it returns the exit code.
func stop(t *testing.T, cmd *exec.Cmd, sig syscall.Signal, within time.Duration, stderr io.Reader, logs *bytes.Buffer) int {
	t.Helper()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(logs, stderr)
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(within):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not stop within %s of %s\n%s", cmd.Args[1], within, sig, logs.String())
	}
	return cmd.ProcessState.ExitCode()
}
