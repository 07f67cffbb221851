package emulator

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/snapwriter/snapwriter/internal/plural"
)

// The emulator keeps every version of every document it was ever sent in
// its JVM's heap, deleted or not (a project's Reset frees little), at
// some 75–165 KB for a realistic district. A suite that writes tens of
// thousands of them fills the default heap (a quarter of the machine's
// memory), and the JVM's full collections then stop the emulator for 5–15
// s at a time: every request waits, and a lease with a shorter TTL
// expires. From outside that looks like a flaky network or a slow store,
// so an emulator this package starts records its pauses (the JVM's GC
// log) and says so (Pauses, and withemulator at its end).

// gcLogPattern names the GC logs in the emulator's own temporary folder:
// one a JVM (%p: its process id), since the launcher runs java more than
// once and a JVM rotates a log it finds at its path; never rotated
// (filecount=0), so that one log holds all of a JVM's pauses.
const gcLogPattern = "gc-%p.log"

// javaOptionsEnv is the variable every JVM reads for options added to its
// command line; the emulator's launcher leaves it to the JVM.
const javaOptionsEnv = "JAVA_TOOL_OPTIONS"

// gcEnv is env with every JVM told to log its collections' pauses into
// dir (gcLogPattern), after any options env already gives it.
func gcEnv(env []string, dir string) []string {
	opt := "-Xlog:gc:file=" + filepath.Join(dir, gcLogPattern) + "::filecount=0"
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, javaOptionsEnv+"="); ok {
			opt = strings.TrimSpace(v + " " + opt)
			continue
		}
		out = append(out, kv)
	}
	return append(out, javaOptionsEnv+"="+opt)
}

// GCPauses sums the stops of the emulator's JVM for garbage collection.
type GCPauses struct {
	// Count is the pauses logged; Full is how many were full collections
	// (the JVM's last resort, when its heap is full of live data).
	Count, Full int
	// Longest is the longest pause, and Total all of them together.
	Longest, Total time.Duration
}

// Stalled reports whether a pause was long enough to matter to a test: a
// second, a fifth of the shortest lock TTL the suites give a writer.
func (p GCPauses) Stalled() bool { return p.Longest >= time.Second }

// String says the pauses for a person: "6.6 s at most (1 full collection;
// 231 pauses, 9.8 s in all)".
func (p GCPauses) String() string {
	return fmt.Sprintf("%.1f s at most (%s; %s, %.1f s in all)", p.Longest.Seconds(),
		plural.N(p.Full, "full collection"), plural.N(p.Count, "pause"), p.Total.Seconds())
}

// gcPauseLine matches a pause of the JVM's unified GC log (-Xlog:gc):
// "[396.195s][info][gc] GC(229) Pause Full (G1 Compaction Pause)
// 6021M->4544M(6028M) 6590.298ms". Concurrent phases ("Concurrent Mark
// Cycle … ms") stop nothing and do not match.
var gcPauseLine = regexp.MustCompile(`\] GC\(\d+\) Pause (\w+).* ([0-9.]+)ms$`)

// read adds the pauses of a JVM GC log to p.
func (p *GCPauses) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := gcPauseLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		ms, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			continue
		}
		d := time.Duration(math.Round(ms*1000)) * time.Microsecond // the log's precision
		p.Count++
		p.Total += d
		p.Longest = max(p.Longest, d)
		if m[1] == "Full" {
			p.Full++
		}
	}
	return sc.Err()
}

// Pauses reads the GC pauses of an emulator this process started, so far.
// It fails for an emulator started by someone else (reused through
// FIRESTORE_EMULATOR_HOST): its log is not ours to read.
func (e *Emulator) Pauses() (GCPauses, error) {
	if e.dir == "" {
		return GCPauses{}, fmt.Errorf("emulator: %s was started elsewhere: its GC log is not known", e.Host)
	}
	logs, err := filepath.Glob(filepath.Join(e.dir, strings.Replace(gcLogPattern, "%p", "*", 1)))
	if err == nil && len(logs) == 0 {
		err = errors.New("none written")
	}
	if err != nil {
		return GCPauses{}, fmt.Errorf("emulator: the JVM's GC logs in %s: %w", e.dir, err)
	}
	var all GCPauses
	for _, name := range logs {
		if err := all.readFile(name); err != nil {
			return GCPauses{}, fmt.Errorf("emulator: %w", err)
		}
	}
	return all, nil
}

// readFile adds the pauses of the GC log name to p.
func (p *GCPauses) readFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return p.read(f)
}
