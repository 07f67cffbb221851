//go:build chaos

package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/snapwriter/snapwriter/internal/harness"
)

// hardLimit is how long any snapwriter process may run before the suite
// kills it, so that a process that never returns fails its scenario
// instead of hanging the suite.
const hardLimit = 120 * time.Second

// logEntry is one JSON log line of a snapwriter process.
type logEntry struct {
	Message    string
	Severity   string
	BatchIndex int // -1 when the line has none
	Time       time.Time
	Fields     map[string]any
	Raw        string
}

func (e logEntry) str(key string) string { s, _ := e.Fields[key].(string); return s }

// procSpec describes a snapwriter process.
type procSpec struct {
	name    string   // for messages: "write", "rerun", …
	host    string   // FIRESTORE_EMULATOR_HOST: the proxy or the emulator
	project string   // GOOGLE_CLOUD_PROJECT
	args    []string // the command line after the binary
	limit   time.Duration
	// env: more variables (KEY=value) for the process, such as
	// STORAGE_EMULATOR_HOST and TMPDIR for a gs:// input.
	env []string
	// onLine, if set, sees every JSON log line as it is written, in the
	// goroutine that reads the process's stderr, so that a fault can be
	// injected at exactly that moment.
	onLine func(p *proc, e logEntry)
}

// proc is a running snapwriter process whose stderr is read line by line
// (and kept, for failure messages) and whose exit is bounded by a hard
// kill.
type proc struct {
	spec    procSpec
	cmd     *exec.Cmd
	started time.Time

	mu       sync.Mutex
	stdout   bytes.Buffer
	stderr   bytes.Buffer
	entries  []logEntry
	ended    time.Time
	exited   bool
	code     int
	signaled syscall.Signal // the signal that ended it, if any
	sent     []sentSignal
	hung     bool // killed by the hard limit
	timer    *time.Timer
	done     chan struct{}
}

type sentSignal struct {
	sig syscall.Signal
	at  time.Time
}

// childEnv is this process's environment without anything that would
// steer snapwriter (SNAPWRITER_*, the emulators, the project), plus host
// and project.
func childEnv(host, project string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SNAPWRITER_") || k == "FIRESTORE_EMULATOR_HOST" || k == "GOOGLE_CLOUD_PROJECT" || k == "STORAGE_EMULATOR_HOST" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "FIRESTORE_EMULATOR_HOST="+host, "GOOGLE_CLOUD_PROJECT="+project)
}

// startProc starts the binary. It never fails the test: a process that
// cannot start is reported as exited with code -2.
func startProc(spec procSpec) *proc {
	if spec.limit == 0 {
		spec.limit = hardLimit
	}
	p := &proc{spec: spec, done: make(chan struct{})}
	p.cmd = exec.Command(bin, spec.args...)
	p.cmd.Env = append(childEnv(spec.host, spec.project), spec.env...)
	p.cmd.Stdout = &lockedWriter{mu: &p.mu, w: &p.stdout}
	// If this test process dies, its children die with it.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := p.cmd.StderrPipe()
	if err == nil {
		err = p.cmd.Start()
	}
	p.started = time.Now()
	if err != nil {
		p.stderr.WriteString("starting the process: " + err.Error())
		p.finish(-2, 0)
		return p
	}
	p.timer = time.AfterFunc(spec.limit, func() {
		p.mu.Lock()
		p.hung = true
		p.mu.Unlock()
		_ = p.cmd.Process.Kill()
	})
	go p.read(stderr)
	return p
}

// read reads stderr line by line until the process closes it, then waits
// for the process.
func (p *proc) read(stderr io.Reader) {
	r := bufio.NewReaderSize(stderr, 1<<16)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			p.line(strings.TrimRight(line, "\n"))
		}
		if err != nil {
			break
		}
	}
	err := p.cmd.Wait()
	p.timer.Stop()
	code, sig := 0, syscall.Signal(0)
	if st, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		code = st.ExitStatus()
		if st.Signaled() {
			sig = st.Signal()
		}
	} else if err != nil {
		code = -2
	}
	p.finish(code, sig)
}

func (p *proc) line(line string) {
	p.mu.Lock()
	p.stderr.WriteString(line + "\n")
	p.mu.Unlock()
	if !strings.HasPrefix(line, "{") {
		return
	}
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) != nil {
		return
	}
	e := logEntry{BatchIndex: -1, Fields: m, Raw: line}
	e.Message, _ = m["message"].(string)
	e.Severity, _ = m["severity"].(string)
	if s, ok := m["time"].(string); ok {
		e.Time, _ = time.Parse(time.RFC3339Nano, s)
	}
	if b, ok := m["batchIndex"].(float64); ok {
		e.BatchIndex = int(b)
	}
	if p.spec.onLine != nil {
		p.spec.onLine(p, e)
	}
	p.mu.Lock()
	p.entries = append(p.entries, e)
	p.mu.Unlock()
}

func (p *proc) finish(code int, sig syscall.Signal) {
	p.mu.Lock()
	p.exited, p.code, p.signaled, p.ended = true, code, sig, time.Now()
	p.mu.Unlock()
	close(p.done)
}

// signal sends sig to the process and records when.
func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	p.sent = append(p.sent, sentSignal{sig, time.Now()})
	p.mu.Unlock()
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// signalledAt is when sig was first sent (zero if never).
func (p *proc) signalledAt(sig syscall.Signal) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.sent {
		if s.sig == sig {
			return s.at
		}
	}
	return time.Time{}
}

// extendLimit gives the process d more from now before the hard kill (for
// a process that was stopped on purpose).
func (p *proc) extendLimit(d time.Duration) {
	if p.timer != nil {
		p.timer.Reset(d)
	}
}

// wait waits for the process to end (the hard limit bounds it) and
// returns its exit code (-1 when a signal ended it).
func (p *proc) wait() int {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.signaled != 0 {
		return -1
	}
	return p.code
}

// find returns the first logged line that matches.
func (p *proc) find(match func(logEntry) bool) (logEntry, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.entries {
		if match(e) {
			return e, true
		}
	}
	return logEntry{}, false
}

// fence is the fence the process logged with "snapshot lock acquired"
// ("" if it never did).
func (p *proc) fence() string {
	e, _ := p.find(func(e logEntry) bool { return e.Message == "snapshot lock acquired" })
	return e.str("fence")
}

func (p *proc) stdoutString() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

func (p *proc) stderrString() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// errorLines are the lines of stderr that are not JSON log lines: the
// final "snapwriter: …" error message, mostly.
func (p *proc) errorLines() string {
	var out []string
	for _, l := range strings.Split(p.stderrString(), "\n") {
		if l != "" && !strings.HasPrefix(l, "{") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// duration is how long the process ran (so far, if it has not ended).
func (p *proc) duration() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return p.ended.Sub(p.started)
	}
	return time.Since(p.started)
}

func (p *proc) endedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ended
}

// outcome describes how the process ended, for exit-code columns:
// "0", "5", "SIGKILL", "hung (killed at 120 s)".
func (p *proc) outcome() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !p.exited:
		return "running"
	case p.hung:
		return fmt.Sprintf("hung (killed at %.0f s)", p.spec.limit.Seconds())
	case p.signaled != 0:
		return strings.ToUpper(sigName(p.signaled))
	}
	return fmt.Sprint(p.code)
}

func (p *proc) wasHung() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hung
}

func sigName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "sigkill"
	case syscall.SIGTERM:
		return "sigterm"
	}
	return s.String()
}

// describe is the process's command line, outcome and the tail of its
// stderr, for failure messages.
func (p *proc) describe() string {
	return fmt.Sprintf("%s: snapwriter %s → %s after %s\nstderr (tail):\n%s",
		p.spec.name, strings.Join(p.spec.args, " "), p.outcome(), p.duration().Round(10*time.Millisecond),
		harness.Tail(p.stderrString(), 4000))
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// batchCommitted matches "batch committed" lines of district chunks (not
// the root, batch 0).
func chunkCommitted(e logEntry) bool { return e.Message == "batch committed" && e.BatchIndex >= 1 }
