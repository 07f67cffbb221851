// Package readercontract reads the Firestore documents snapwriter stores
// exactly as the TypeScript application's readers (its
// FirestoreSnapshotStorage) read them, and asserts what those readers would
// report: the newest successful snapshot, the newest snapshot, the snapshot
// list and getSnapshot, for complete, partial, interrupted (SIGTERM,
// SIGKILL) and repaired writes, and for a root the application itself
// wrote. The package is test-only; run it against the emulator:
//
//	go run ./emulator/withemulator -- go test -race -count=1 -v ./readercontract/
package readercontract

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
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
	"github.com/snapwriter/snapwriter/model"
)

var (
	emu *emulator.Emulator
	// bin is the snapwriter binary, built once by TestMain from
	// ./cmd/snapwriter.
	bin string
)

// procLimit bounds every snapwriter process a test starts: one that never
// returns is killed and fails its test instead of hanging the package.
const procLimit = 150 * time.Second

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		// Every test here runs the binary, and runBin and startBin skip
		// them in -short mode (make test-short): nothing to build.
		return emulator.Main(m, &emu)
	}
	dir, err := os.MkdirTemp("", "readercontract-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "snapwriter")
	// Built from the module root (this package's parent directory). A
	// binary that cannot be built fails the package: no test is skipped.
	build := exec.Command("go", "build", "-o", bin, "./cmd/snapwriter")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: go build ./cmd/snapwriter: %v\n%s", err, out)
		return 1
	}
	return emulator.Main(m, &emu)
}

// childEnv is this process's environment without anything that would
// steer snapwriter, plus the Firestore host and project.
func childEnv(host, project string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SNAPWRITER_") || k == emulator.HostEnv || k == "GOOGLE_CLOUD_PROJECT" {
			continue
		}
		env = append(env, kv)
	}
	// JSON logs by the variable, not --log-format: generate, which logs
	// nothing, does not take the flag, and ignores the variable.
	return append(env, emulator.HostEnv+"="+host, "GOOGLE_CLOUD_PROJECT="+project, "SNAPWRITER_LOG_FORMAT=json")
}

// outcome is how a snapwriter process ended.
type outcome struct {
	code           int
	stdout, stderr string
}

// runBin runs the binary against host and project to its end (at most
// procLimit) with JSON logs (childEnv).
func runBin(t *testing.T, host, project string, args ...string) outcome {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the built snapwriter binary: skipped in -short mode")
	}
	ctx, cancel := context.WithTimeout(context.Background(), procLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = childEnv(host, project)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	o := outcome{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	if ctx.Err() != nil {
		t.Fatalf("snapwriter %s: still running after %s, killed\n%s", strings.Join(args, " "), procLimit, tail(o.stderr))
	}
	if err != nil && o.code < 0 {
		t.Fatalf("snapwriter %s: %v\n%s", strings.Join(args, " "), err, tail(o.stderr))
	}
	t.Logf("snapwriter %s: exit %d in %s", strings.Join(args, " "), o.code, time.Since(start).Round(time.Millisecond))
	return o
}

// mustRun is runBin that requires exit code want.
func mustRun(t *testing.T, want int, host, project string, args ...string) outcome {
	t.Helper()
	o := runBin(t, host, project, args...)
	if o.code != want {
		t.Fatalf("snapwriter %s: exit %d, want %d\nstderr:\n%s", strings.Join(args, " "), o.code, want, tail(o.stderr))
	}
	return o
}

// tail is the end of a process's output, for failure messages: its last
// lines, each cut short.
func tail(s string) string {
	const lines, width = 40, 400
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > lines {
		ls = append([]string{"…"}, ls[len(ls)-lines:]...)
	}
	for i, l := range ls {
		if len(l) > width {
			ls[i] = l[:width] + "…"
		}
	}
	return strings.Join(ls, "\n")
}

// genInput writes `snapwriter generate` output for date into the test's
// temp dir and returns its path and its decoded form.
func genInput(t *testing.T, date string, districts int, seed int64) (string, *model.Snapshot) {
	t.Helper()
	o := mustRun(t, 0, emu.Host, "t-generate", "generate", "--date", date,
		"--districts", fmt.Sprint(districts), "--seed", fmt.Sprint(seed))
	path := filepath.Join(t.TempDir(), date+".json")
	if err := os.WriteFile(path, []byte(o.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	snap, err := model.Decode(strings.NewReader(o.stdout))
	if err != nil {
		t.Fatalf("decoding the generated input: %v", err)
	}
	if len(snap.Payload.Districts) != districts {
		t.Fatalf("generated %d districts, want %d", len(snap.Payload.Districts), districts)
	}
	return path, snap
}

// getEquals runs `snapwriter get --date D --json` (exit 0) and requires
// its output to decode equal to want.
func getEquals(t *testing.T, project, date string, want *model.Snapshot) {
	t.Helper()
	o := mustRun(t, 0, emu.Host, project, "get", "--date", date, "--compact")
	got, err := model.Decode(strings.NewReader(o.stdout))
	if err != nil {
		t.Fatalf("get --date %s --json: output does not decode: %v", date, err)
	}
	if d := model.Diff(want, got); d != "" {
		t.Errorf("get --date %s --json differs from the input: %s", date, d)
	}
}

// proc is a snapwriter process whose JSON log lines (stderr) are seen as
// they are written, so that a signal can be sent at a chosen moment.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}

	mu      sync.Mutex
	stderr  bytes.Buffer
	stdout  bytes.Buffer
	code    int
	sig     syscall.Signal
	timeout bool
}

// logLine is one JSON log line of a snapwriter process.
type logLine map[string]any

func (l logLine) message() string { s, _ := l["message"].(string); return s }

// batchIndex is the line's batchIndex, -1 when it has none.
func (l logLine) batchIndex() int {
	if f, ok := l["batchIndex"].(float64); ok {
		return int(f)
	}
	return -1
}

// startBin starts the binary; onLine, if set, sees every JSON log line in
// the goroutine that reads stderr.
func startBin(t *testing.T, host, project string, onLine func(p *proc, l logLine), args ...string) *proc {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the built snapwriter binary: skipped in -short mode")
	}
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = childEnv(host, project)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Stdout = &lockedWriter{mu: &p.mu, w: &p.stdout}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting snapwriter: %v", err)
	}
	limit := time.AfterFunc(procLimit, func() {
		p.mu.Lock()
		p.timeout = true
		p.mu.Unlock()
		_ = p.cmd.Process.Kill()
	})
	go func() {
		r := bufio.NewReaderSize(stderr, 1<<16)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				p.mu.Lock()
				p.stderr.WriteString(line)
				p.mu.Unlock()
				var l logLine
				if onLine != nil && strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &l) == nil {
					onLine(p, l)
				}
			}
			if err != nil {
				break
			}
		}
		_ = p.cmd.Wait()
		limit.Stop()
		p.mu.Lock()
		p.code = p.cmd.ProcessState.ExitCode()
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.sig = ws.Signal()
		}
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// wait waits for the process to end and returns its exit code (-1 when a
// signal ended it) and that signal.
func (p *proc) wait(t *testing.T) (int, syscall.Signal) {
	t.Helper()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timeout {
		t.Fatalf("snapwriter %s: still running after %s, killed\n%s", strings.Join(p.cmd.Args[1:], " "), procLimit, tail(p.stderr.String()))
	}
	return p.code, p.sig
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
