//go:build chaos

package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/gcsserver"
	"github.com/snapwriter/snapwriter/internal/benchutil"
	"github.com/snapwriter/snapwriter/internal/faultproxy"
	"github.com/snapwriter/snapwriter/model"
)

// Cloud Storage input under faults: the snapshot is a per-district folder
// (`generate --folder`, the application's layout) on a Cloud Storage API
// server (gcsserver, fake-gcs-server in this process) that the binary
// reaches through a fault proxy of its own, as STORAGE_EMULATOR_HOST. The
// binary copies the whole folder before it takes the lock, so a fault
// during the read must leave nothing written — no root, no district, no
// lock — and a rerun writes the folder's content.

const (
	// gcsBucket holds the folders.
	gcsBucket = "exports"
	// gcsDistricts is the folders' size: a few hundred objects, so that
	// at gcsLatency the read lasts seconds and a fault lands inside it.
	gcsDistricts = 300
	// gcsLatency is the proxy's delay each way while the folder is read:
	// 16 objects in flight at 0.2 s a round trip read 300 districts in
	// about 4 s.
	gcsLatency = 100 * time.Millisecond
	// gcsTimeout is the writers' --request-timeout: how long Cloud Storage may go
	// without answering before the read fails (default 30 s; short here
	// so that the rows run quickly).
	gcsTimeout = 5 * time.Second
	// gcsSlack is what a write may take past gcsTimeout to notice the
	// silence and exit, on a loaded 2-core machine.
	gcsSlack = 10 * time.Second
)

// gcsFolder is one scenario's snapshot folder on its own Cloud Storage
// server, behind its own fault proxy.
type gcsFolder struct {
	srv   *gcsserver.Server
	proxy *faultproxy.Proxy
	local string // the folder on disk, as generated (and as replaced)
	url   string // gs://exports/snapshots/DATE/
	bytes int64  // the folder's total size
	seed  int
}

// newGCSFolder generates a folder of n districts for day with the binary,
// uploads it to a new server under snapshots/DATE/, manifest.json last
// (as the application's uploader does), and puts a fault proxy in front.
func newGCSFolder(s *scenario, n, seed int) *gcsFolder {
	t := s.t
	t.Helper()
	srv, err := gcsserver.Start(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucket(gcsBucket)
	p, err := faultproxy.New(strings.TrimPrefix(srv.Host, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	g := &gcsFolder{srv: srv, proxy: p, seed: seed, url: "gs://" + gcsBucket + "/snapshots/" + day + "/"}
	g.local = generateFolder(t, n, seed)
	if g.bytes, err = benchutil.DirBytes(g.local); err != nil {
		t.Fatal(err)
	}
	if err := srv.PutDir(gcsBucket, "snapshots/"+day+"/", g.local, "manifest.json"); err != nil {
		t.Fatal(err)
	}
	return g
}

// generateFolder runs `snapwriter generate --folder` into a new directory.
func generateFolder(t *testing.T, n, seed int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), day)
	p := startProc(procSpec{name: "generate", host: emu.Host, project: "unused",
		args: []string{"generate", "--date", day, "--districts", fmt.Sprint(n), "--seed", fmt.Sprint(seed), "--folder", dir}})
	if p.wait() != 0 {
		t.Fatalf("generate --folder: %s", p.describe())
	}
	return dir
}

// env is what a process reading the folder through the proxy needs, with
// TMPDIR (where the read spools the folder) set to tmp.
func (g *gcsFolder) env(tmp string) []string {
	return []string{gcsserver.HostEnv + "=http://" + g.proxy.Addr(), "TMPDIR=" + tmp}
}

// loadFolder reads the snapshot folder dir as the checks compare it: with
// model.LoadDir, the reader of a local snapshot directory. It stays open
// until the test ends.
func loadFolder(t *testing.T, dir string) *input {
	t.Helper()
	snap, err := model.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snap.Close() })
	return &input{path: dir, snap: snap}
}

// lostUnknown resets the row's documents-lost column before the final
// get, which sets it (checkNothingWritten set it to not applicable).
func (s *scenario) lostUnknown() {
	s.mu.Lock()
	s.lost = -1
	s.mu.Unlock()
}

// readStarted matches the loader's line that a gs:// read began.
func readStarted(e logEntry) bool { return e.Message == "reading input" }

// readDone matches the line that it ended.
func readDone(e logEntry) bool { return e.Message == "input read" }

// startRead starts `write --input gs://…` through the proxy with extra
// arguments, TMPDIR tmp, and returns it once it has logged "reading
// input" and the proxy has delivered a third of the folder's bytes: the
// read is then well under way (listed, manifest read, spool created,
// districts arriving) and far from done. It fails the scenario if the
// write ended, or finished its read, first.
func (g *gcsFolder) startRead(s *scenario, name, tmp string, extra ...string) (*proc, time.Time) {
	t := s.t
	t.Helper()
	var started moment
	args := append([]string{"write", "--input", g.url, "--json"}, extra...)
	w := s.start(procSpec{name: name, host: s.direct(), env: g.env(tmp), args: args,
		onLine: func(_ *proc, e logEntry) {
			if readStarted(e) {
				started.set()
			}
		}})
	at, ok := started.waitSet(w, hardLimit)
	if !ok {
		s.exited(w)
		t.Fatalf("%s never logged %q\n%s", name, "reading input", w.describe())
	}
	base := g.proxy.Stats().BytesDown
	if !waitFor(w, hardLimit, func() bool { return g.proxy.Stats().BytesDown-base >= g.bytes/3 }) {
		s.exited(w)
		t.Fatalf("%s ended before a third of the folder (%d bytes) was read\n%s", name, g.bytes, w.describe())
	}
	if _, done := w.find(readDone); done {
		t.Fatalf("%s read the whole folder before the fault: the read is too fast for this row (raise gcsLatency)\n%s", name, w.describe())
	}
	return w, at
}

// waitFor polls cond (every 20 ms, a condition, not a guess at a time)
// until it holds, or p ends, or timeout; it reports whether it held.
func waitFor(p *proc, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		select {
		case <-p.done:
			return cond()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false
}

// checkNothingWritten checks, as an operator would, that a write that
// failed while reading its input left nothing: no root and no district
// document of the date, `snapwriter list` does not show it, no lock, and
// the read never finished.
func (s *scenario) checkNothingWritten(w *proc) {
	t := s.t
	t.Helper()
	if e, ok := w.find(readDone); ok {
		t.Errorf("%s logged %q: the fault came after the read\n%s", w.spec.name, "input read", e.Raw)
	}
	if e, ok := w.find(func(e logEntry) bool { return e.Message == "snapshot lock acquired" }); ok {
		t.Errorf("%s took the lock although its input was never read whole: %s", w.spec.name, e.Raw)
	}
	if st := s.read(); st.rootExists || len(st.docs) > 0 {
		t.Errorf("written from an input that was never read whole: %s", st)
	}
	l := s.run("list", s.direct(), "list")
	if l.wait() != 0 {
		t.Errorf("list: exit %s\n%s", l.outcome(), l.describe())
	} else if strings.Contains(l.stdoutString(), day) {
		t.Errorf("list shows %s:\n%s", day, l.stdoutString())
	}
	s.checkNoLocks()
	s.mu.Lock()
	s.lost = notApplicable
	s.mu.Unlock()
}

// emptyDir checks that dir holds nothing (the spool is unlinked as soon
// as it is created, so nothing is left however the process ended).
func emptyDir(t *testing.T, dir, after string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("TMPDIR %s holds %s after %s; want nothing left", dir, strings.Join(names, ", "), after)
	}
}

// spoolOf finds w's spool among its open files: a file named
// snapwriter-gcs-*.spool in tmp that is already unlinked ("(deleted)").
// It returns its size so far, and whether there is one.
func spoolOf(w *proc, tmp string) (int64, bool) {
	if w.cmd.Process == nil {
		return 0, false
	}
	fds := fmt.Sprintf("/proc/%d/fd", w.cmd.Process.Pid)
	entries, err := os.ReadDir(fds)
	if err != nil {
		return 0, false
	}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(fds, e.Name()))
		if err != nil || !strings.HasPrefix(target, filepath.Join(tmp, "snapwriter-gcs-")) || !strings.HasSuffix(target, " (deleted)") {
			continue
		}
		// Stat follows the link to the unlinked file itself.
		if info, err := os.Stat(filepath.Join(fds, e.Name())); err == nil {
			return info.Size(), true
		}
	}
	return 0, false
}

// Scenario 12a/12b: Cloud Storage goes away while a write reads its
// folder — black-holed (nothing answers, nothing is closed), or every
// connection reset and every new one refused (a server that is down).
// The write exits 1 within --request-timeout (plus the time to notice) of the
// fault, naming the endpoint (and, for the silence, the bound), and
// writes nothing; once Cloud Storage is back the same write exits 0 and
// get returns the folder's content.
func TestGCSGoneMidRead(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		key, name string
		fault     func(p *faultproxy.Proxy, on bool)
	}{
		{"blackhole", "12a. Cloud Storage black-holed mid-read (gs:// folder), then rerun",
			func(p *faultproxy.Proxy, on bool) { p.Blackhole(on) }},
		{"refused", "12b. Cloud Storage resetting and refusing every connection mid-read (gs:// folder), then rerun",
			func(p *faultproxy.Proxy, on bool) { p.Refuse(on) }},
	} {
		t.Run(v.key, func(t *testing.T) {
			t.Parallel()
			s := newScenario(t, v.name)
			g := newGCSFolder(s, gcsDistricts, 1)
			g.proxy.SetLatency(gcsLatency)
			tmp := t.TempDir()
			w, readAt := g.startRead(s, "write", tmp, "--request-timeout", gcsTimeout.String())
			faultAt := time.Now()
			v.fault(g.proxy, true)
			s.exited(w, 1)
			took := w.endedAt().Sub(faultAt)
			if took > gcsTimeout+gcsSlack {
				t.Errorf("exit %.1f s after the fault, want within --request-timeout %s (+ %s to notice)", took.Seconds(), gcsTimeout, gcsSlack)
			}
			msg := w.errorLines()
			endpoint := "the Cloud Storage emulator at " + g.proxy.Addr()
			if !strings.Contains(msg, g.proxy.Addr()) {
				t.Errorf("the error does not name the endpoint %s:\n%s", g.proxy.Addr(), msg)
			}
			if v.key == "blackhole" {
				// Silence is what --request-timeout bounds: the message says so.
				want := "no answer from " + endpoint + " within " + gcsTimeout.String() + " (--request-timeout)"
				if !strings.Contains(msg, want) {
					t.Errorf("the error does not say %q:\n%s", want, msg)
				}
			}
			t.Logf("write: read began %.1f s before the fault; exit %s %.1f s after it: %s",
				faultAt.Sub(readAt).Seconds(), w.outcome(), took.Seconds(), strings.TrimSpace(msg))
			s.checkNothingWritten(w)
			emptyDir(t, tmp, "the failed read")

			v.fault(g.proxy, false)
			r := s.start(procSpec{name: "rerun", host: s.direct(), env: g.env(tmp), limit: writeLimit,
				args: []string{"write", "--input", g.url, "--request-timeout", gcsTimeout.String(), "--json"}})
			if s.exited(r, 0) {
				s.recovered(r.endedAt().Sub(faultAt))
			}
			if res := s.result(r); res != nil && (!res.Complete || res.DistrictsWritten != gcsDistricts) {
				t.Errorf("rerun: complete %v, %d districts written, want all %d", res.Complete, res.DistrictsWritten, gcsDistricts)
			}
			s.note("exit 1 %.1f s after the fault (--request-timeout %s); nothing written; rerun took %.1f s", took.Seconds(), gcsTimeout, r.duration().Seconds())
			s.lostUnknown()
			s.checkFinal(loadFolder(t, g.local), manifestOpts{})
			emptyDir(t, tmp, "the rerun")
		})
	}
}

// Scenario 12c: the write is SIGKILLed while it reads its folder, after
// "reading input" and before "input read", with its spool open in a TMPDIR
// of its own. Nothing is written, no lock is left, and TMPDIR is empty
// (the spool was unlinked at creation: the kernel frees it with the
// process). The same write, without faults and at once (no lock to wait
// out: the lock is taken only after the read), exits 0 and get returns
// the folder.
func TestGCSSIGKILLMidRead(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "12c. SIGKILL mid-read of a gs:// folder, then rerun")
	g := newGCSFolder(s, gcsDistricts, 1)
	g.proxy.SetLatency(gcsLatency)
	tmp := t.TempDir()
	w, readAt := g.startRead(s, "write", tmp)
	// The spool must be seen in tmp, or an empty tmp afterwards would
	// prove nothing.
	var spooled int64
	if !waitFor(w, hardLimit, func() bool {
		var ok bool
		spooled, ok = spoolOf(w, tmp)
		return ok && spooled > 0
	}) {
		t.Fatalf("no unlinked spool file of write in %s while it read the folder\n%s", tmp, w.describe())
	}
	w.signal(syscall.SIGKILL)
	s.killed(w, "its read finished")
	killedAt := w.signalledAt(syscall.SIGKILL)
	if _, done := w.find(readDone); done {
		t.Fatalf("killed after %q: not mid-read\n%s", "input read", w.describe())
	}
	s.note("killed %.1f s into the read, %d of %d bytes spooled (unlinked, in TMPDIR)",
		killedAt.Sub(readAt).Seconds(), spooled, g.bytes)
	s.checkNothingWritten(w)
	emptyDir(t, tmp, "the kill")

	g.proxy.SetLatency(0)
	g.proxy.ResetAll() // the dead writer's connections, held bytes and all
	r := s.start(procSpec{name: "rerun", host: s.direct(), env: g.env(tmp), limit: writeLimit,
		args: []string{"write", "--input", g.url, "--json"}})
	if s.exited(r, 0) {
		s.recovered(r.endedAt().Sub(killedAt))
	}
	if res := s.result(r); res != nil {
		// No lock to wait out: a lock left by the killed writer would
		// cost the rerun its TTL (30 s); an acquire on a loaded emulator
		// takes well under 10 s.
		if !res.Complete || res.DistrictsWritten != gcsDistricts || res.LockWaitMs > 10000 {
			t.Errorf("rerun: complete %v, %d districts written (want %d), lock wait %d ms (want no wait: nothing was locked)",
				res.Complete, res.DistrictsWritten, gcsDistricts, res.LockWaitMs)
		}
		s.note("rerun at once: exit 0 in %.1f s, lock wait %d ms", r.duration().Seconds(), res.LockWaitMs)
	}
	s.lostUnknown()
	s.checkFinal(loadFolder(t, g.local), manifestOpts{})
	emptyDir(t, tmp, "the rerun")
}

// Scenario 12d: an object of the folder is replaced (a new upload) while
// the write reads it, after it was listed and before it was read. The
// write reads every object at the generation it listed, so it finds that
// generation gone: exit 7 (not ready), saying the object was replaced,
// nothing written. The rerun reads the new upload whole and writes it.
func TestGCSReplacedMidRead(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "12d. an object of the gs:// folder replaced mid-read, then rerun")
	g := newGCSFolder(s, gcsDistricts, 1)
	g.proxy.SetLatency(gcsLatency)
	// The folder's objects are read in name order, 16 at a time: the
	// district sorting last is read near the end (only metadata.json
	// after it), long after a third of the bytes.
	names, err := filepath.Glob(filepath.Join(g.local, "district_*.json"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no district files in %s: %v", g.local, err)
	}
	sort.Strings(names)
	victim := filepath.Base(names[len(names)-1])
	other := generateFolder(t, gcsDistricts, 2)
	content, err := os.ReadFile(filepath.Join(other, victim))
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(filepath.Join(g.local, victim))
	if err != nil {
		t.Fatal(err)
	}
	if string(old) == string(content) {
		t.Fatalf("%s is the same under seeds 1 and 2: the replacement would change nothing", victim)
	}

	tmp := t.TempDir()
	w, _ := g.startRead(s, "write", tmp)
	faultAt := time.Now()
	g.srv.Put(gcsBucket, "snapshots/"+day+"/"+victim, content)
	if err := os.WriteFile(filepath.Join(g.local, victim), content, 0o600); err != nil {
		t.Fatal(err)
	}
	s.exited(w, 7)
	msg := w.errorLines()
	if want := "replaced or deleted while the snapshot was read"; !strings.Contains(msg, want) || !strings.Contains(msg, victim) {
		t.Errorf("the error does not say %s was %s:\n%s", victim, want, msg)
	}
	t.Logf("write: exit %s %.1f s after the replacement: %s", w.outcome(), w.endedAt().Sub(faultAt).Seconds(), strings.TrimSpace(msg))
	s.checkNothingWritten(w)
	emptyDir(t, tmp, "the refused read")

	r := s.start(procSpec{name: "rerun", host: s.direct(), env: g.env(tmp), limit: writeLimit,
		args: []string{"write", "--input", g.url, "--json"}})
	if s.exited(r, 0) {
		s.recovered(r.endedAt().Sub(faultAt))
	}
	s.note("%s replaced %.1f s before the write ended with exit 7; rerun took %.1f s", victim, w.endedAt().Sub(faultAt).Seconds(), r.duration().Seconds())
	s.lostUnknown()
	// The new upload: the folder on disk with the replaced district.
	s.checkFinal(loadFolder(t, g.local), manifestOpts{})
}
