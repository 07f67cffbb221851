//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/internal/faultproxy"
	"github.com/snapwriter/snapwriter/internal/harness"
	"github.com/snapwriter/snapwriter/model"
)

const day = "2026-11-20"

// input is a generated snapshot: its file and its decoded form.
type input struct {
	path string
	snap *model.Snapshot
}

var inputs struct {
	sync.Mutex
	m map[string]*inputOnce
}

type inputOnce struct {
	once sync.Once
	in   *input
	err  error
}

// generated returns `snapwriter generate --date date --districts n --seed
// seed`, generated once per run and shared by the scenarios.
func generated(t *testing.T, date string, n int, seed int) *input {
	t.Helper()
	return generate(t, date, n, seed, false)
}

// leanGenerated is generated with every list of each district cut to its
// first leanListLen entries: the same districts and chunks, a quarter of
// the bytes (about 2.9 KB a district instead of 11.8). The 2,000-district
// crash scenarios write it. The emulator keeps every document version it
// was ever sent in its heap, deleted or not, at some 75–165 KB each for a
// realistic district; with realistic districts the crash scenarios alone
// (about 30,000 district writes) filled most of its default heap (a
// quarter of the machine's memory), and its full collections then stopped
// the emulator for 5–15 s at a time, which ends any writer's 5 s lease
// (CI saw 1c's writer exit 3 so). What those scenarios test — where a
// write stops, what is left, what the next run does — does not depend on
// the districts' size; the other scenarios keep realistic ones.
func leanGenerated(t *testing.T, date string, n int, seed int) *input {
	t.Helper()
	return generate(t, date, n, seed, true)
}

// leanListLen is how many entries each list of a lean district keeps.
const leanListLen = 3

func generate(t *testing.T, date string, n int, seed int, lean bool) *input {
	t.Helper()
	key := fmt.Sprintf("%s-%d-%d", date, n, seed)
	if lean {
		key += "-lean"
	}
	inputs.Lock()
	if inputs.m == nil {
		inputs.m = map[string]*inputOnce{}
	}
	o := inputs.m[key]
	if o == nil {
		o = &inputOnce{}
		inputs.m[key] = o
	}
	inputs.Unlock()
	o.once.Do(func() {
		out, err := exec.Command(bin, "generate", "--date", date, "--districts", fmt.Sprint(n), "--seed", fmt.Sprint(seed)).Output()
		if err != nil {
			o.err = fmt.Errorf("snapwriter generate: %w", err)
			return
		}
		if lean {
			if out, err = leanDistricts(out); err != nil {
				o.err = fmt.Errorf("cutting the generated districts' lists: %w", err)
				return
			}
		}
		path := filepath.Join(work, key+".json")
		if err := os.WriteFile(path, out, 0o600); err != nil {
			o.err = err
			return
		}
		snap, err := model.Decode(bytes.NewReader(out))
		if err != nil {
			o.err = fmt.Errorf("decoding the generated input: %w", err)
			return
		}
		o.in = &input{path: path, snap: snap}
	})
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.in
}

// leanDistricts is the Snapshot JSON raw with every list inside each of
// its districts cut to leanListLen entries. Numbers stay as they were
// written (json.Number).
func leanDistricts(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var snap map[string]any
	if err := dec.Decode(&snap); err != nil {
		return nil, err
	}
	payload, _ := snap["payload"].(map[string]any)
	districts, ok := payload["districts"].([]any)
	if !ok {
		return nil, fmt.Errorf("no payload.districts list")
	}
	for i, d := range districts {
		districts[i] = cutLists(d)
	}
	return json.Marshal(snap)
}

func cutLists(v any) any {
	switch x := v.(type) {
	case []any:
		x = x[:min(len(x), leanListLen)]
		for i := range x {
			x[i] = cutLists(x[i])
		}
		return x
	case map[string]any:
		for k, e := range x {
			x[k] = cutLists(e)
		}
	}
	return v
}

// notApplicable is lost for a scenario that writes nothing.
const notApplicable = -2

// scenario is one row of the fault matrix: its own emulator project, its
// own fault proxy in front of the emulator, and what it measured.
type scenario struct {
	t       *testing.T
	name    string
	project string
	proxy   *faultproxy.Proxy
	client  *firestore.Client // direct to the emulator, for the checks

	mu       sync.Mutex
	procs    []*proc
	codes    []string
	recovery time.Duration // < 0: not recovered / not applicable
	lost     int           // districts of the input missing or different at the end; -1 unknown, notApplicable
	notes    []string
	// date is the snapshot the checks look at; "" means day. A scenario
	// of several dates sets it before checking each.
	date string
}

// day is the snapshot the checks look at.
func (s *scenario) day() string {
	if s.date == "" {
		return day
	}
	return s.date
}

// newScenario sets up a scenario; its matrix row is logged (and kept for
// the summary) when the test ends.
func newScenario(t *testing.T, name string) *scenario {
	t.Helper()
	p, err := faultproxy.New(emu.Host)
	if err != nil {
		t.Fatal(err)
	}
	s := &scenario{t: t, name: name, project: emulator.ProjectID(t), proxy: p, recovery: -1, lost: -1}
	s.client = emu.TestClientFor(t, s.project)
	t.Cleanup(func() {
		// Nothing may outlive the scenario.
		for _, pr := range s.procs {
			if pr.cmd.Process != nil {
				_ = pr.cmd.Process.Kill()
			}
		}
		p.Close()
		s.report()
	})
	return s
}

// start starts snapwriter against host (the proxy or the emulator).
func (s *scenario) start(spec procSpec) *proc {
	s.t.Helper()
	if spec.project == "" {
		spec.project = s.project
	}
	p := startProc(spec)
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return p
}

// viaProxy and direct are the two FIRESTORE_EMULATOR_HOST values.
func (s *scenario) viaProxy() string { return s.proxy.Addr() }
func (s *scenario) direct() string   { return emu.Host }

// run starts snapwriter and waits for it.
func (s *scenario) run(name, host string, args ...string) *proc {
	s.t.Helper()
	p := s.start(procSpec{name: name, host: host, args: args})
	p.wait()
	return p
}

// exited records p's exit in the matrix row and fails the scenario unless
// it is one of want.
func (s *scenario) exited(p *proc, want ...int) bool {
	s.t.Helper()
	code := p.wait()
	s.mu.Lock()
	s.codes = append(s.codes, fmt.Sprintf("%s %s", p.spec.name, p.outcome()))
	s.mu.Unlock()
	for _, w := range want {
		if code == w && !p.wasHung() {
			return true
		}
	}
	s.t.Errorf("%s: exit %s, want %s\n%s", p.spec.name, p.outcome(), codeList(want), p.describe())
	return false
}

// killed records a process this scenario killed on purpose; it fails the
// scenario (the harness could not inject the fault) if it ended otherwise.
func (s *scenario) killed(p *proc, what string) {
	s.t.Helper()
	p.wait()
	s.mu.Lock()
	s.codes = append(s.codes, fmt.Sprintf("%s %s", p.spec.name, p.outcome()))
	s.mu.Unlock()
	if p.outcome() != "SIGKILL" {
		s.t.Fatalf("%s ended before %s, so the fault could not be injected\n%s", p.spec.name, what, p.describe())
	}
}

func codeList(want []int) string {
	var ss []string
	for _, w := range want {
		ss = append(ss, fmt.Sprint(w))
	}
	return strings.Join(ss, " or ")
}

func (s *scenario) recovered(d time.Duration) {
	s.mu.Lock()
	s.recovery = d
	s.mu.Unlock()
	s.t.Logf("recovered %s after the fault", d.Round(100*time.Millisecond))
}

func (s *scenario) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.notes = append(s.notes, msg)
	s.mu.Unlock()
	s.t.Log(msg)
}

// report logs the scenario's matrix row and keeps it for the summary.
func (s *scenario) report() {
	s.mu.Lock()
	defer s.mu.Unlock()
	outcome := "ok"
	if len(s.notes) > 0 {
		outcome = "ok: " + strings.Join(s.notes, "; ")
	}
	if s.t.Failed() {
		outcome = "**FAILED** (see the test log)"
	}
	if s.t.Skipped() {
		outcome = "skipped"
	}
	rec := "—"
	if s.recovery >= 0 {
		rec = fmt.Sprintf("%.1f s", s.recovery.Seconds())
	}
	lost := "?" // the final get failed
	switch {
	case s.lost >= 0:
		lost = fmt.Sprint(s.lost)
	case s.lost == notApplicable:
		lost = "—"
	}
	codes := strings.Join(s.codes, ", ")
	if codes == "" {
		codes = "—"
	}
	r := [5]string{s.name, outcome, codes, rec, lost}
	addRow(r)
	s.t.Log("chaos: " + formatRow(r))
}

// writeResult is what the checks read of the result `write --json` and
// `repair --json` print.
type writeResult struct {
	Complete         bool   `json:"complete"`
	Skipped          bool   `json:"skipped"`
	DistrictsWritten int    `json:"districtsWritten"`
	DistrictsKept    int    `json:"districtsKept"`
	RootCommits      int    `json:"rootCommits"`
	LockWaitMs       int64  `json:"lockWaitMs"`
	TotalDurationMs  int64  `json:"totalDurationMs"`
	Fence            string `json:"fence"`
}

// recordInterval is the writers' --record-interval (the default).
const recordInterval = time.Second

// result decodes the JSON result p printed (nil, and the scenario failed,
// if it printed none). It checks the write's root commits: its root (or
// take-over) transaction, its finish, and at most one progress record per
// record interval.
func (s *scenario) result(p *proc) *writeResult {
	s.t.Helper()
	out := strings.TrimSpace(p.stdoutString())
	var r writeResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		s.t.Errorf("%s: no JSON result on stdout (%v): %q", p.spec.name, err, harness.Tail(out, 500))
		return nil
	}
	if limit := 3 + int(time.Duration(r.TotalDurationMs)*time.Millisecond/recordInterval); r.RootCommits > limit {
		s.t.Errorf("%s: %d root commits in %d ms: more than one progress record per %s (at most %d)",
			p.spec.name, r.RootCommits, r.TotalDurationMs, recordInterval, limit)
	}
	return &r
}

// logWarnings logs p's WARNING and ERROR lines (at most five of each
// message), to explain a slow recovery.
func (s *scenario) logWarnings(p *proc) {
	s.t.Helper()
	p.mu.Lock()
	entries := append([]logEntry(nil), p.entries...)
	p.mu.Unlock()
	seen := map[string]int{}
	for _, e := range entries {
		if e.Severity != "WARNING" && e.Severity != "ERROR" {
			continue
		}
		if seen[e.Message]++; seen[e.Message] <= 5 {
			s.t.Logf("%s %s: %s", p.spec.name, e.Severity, harness.Tail(e.Raw, 600))
		}
	}
}

// ---- What an operator checks ----

// checkGet runs `snapwriter get --date D --json` against the emulator
// itself and compares it with want; it records how many of want's
// districts are missing or differ (documents lost).
func (s *scenario) checkGet(want *input) bool {
	s.t.Helper()
	p := s.run("get", s.direct(), "get", "--date", s.day(), "--compact")
	if p.wait() != 0 || p.wasHung() {
		s.t.Errorf("get: exit %s\n%s", p.outcome(), p.describe())
		return false
	}
	got, err := model.Decode(strings.NewReader(p.stdoutString()))
	if err != nil {
		s.t.Errorf("get printed what model.Decode refuses: %v", err)
		return false
	}
	lost := lostDistricts(want.snap, got)
	s.mu.Lock()
	s.lost = lost
	s.mu.Unlock()
	if !model.Equal(got, want.snap) {
		s.t.Errorf("get differs from the input (%d of %d districts missing or different): %s",
			lost, len(want.snap.Payload.Districts), model.Diff(got, want.snap))
		return false
	}
	return true
}

// lostDistricts counts want's districts that got lacks or holds otherwise.
func lostDistricts(want, got *model.Snapshot) int {
	have := map[string][]byte{}
	for _, d := range got.Payload.Districts {
		b, _ := model.Marshal(memData(d))
		have[d.DistrictID] = b
	}
	n := 0
	for _, d := range want.Payload.Districts {
		b, _ := model.Marshal(memData(d))
		if g, ok := have[d.DistrictID]; !ok || !bytes.Equal(g, b) {
			n++
		}
	}
	return n
}

// stored is what Firestore holds for the snapshot.
type stored struct {
	date          string // the snapshot's id
	rootExists    bool
	rootFence     string
	rootStatus    string
	writeState    string            // metadata.writeState: writing or finished
	writeComplete bool              // metadata.writeComplete
	successful    map[string]bool   // metadata.successfulDistricts
	failedList    map[string]bool   // metadata.failedDistricts
	entries       map[string]string // district id → manifest status (from the root, or its manifest pages)
	paged         bool              // the entries came from manifest pages
	docs          map[string]docInfo
}

// writing reports whether the root says a write is at work (or its
// writer died before its finish): then the root may lag the documents.
func (st stored) writing() bool { return st.writeState == "writing" }

// finishedComplete reports whether the root records a finished write of
// every district: a rerun of the same input then writes it all again.
func (st stored) finishedComplete() bool {
	return st.rootExists && st.writeState == "finished" && st.writeComplete
}

type docInfo struct {
	fence   string
	updated time.Time
}

// count of manifest entries with status st.
func (st stored) count(want string) int {
	n := 0
	for _, v := range st.entries {
		if v == want {
			n++
		}
	}
	return n
}

func (st stored) String() string {
	if !st.rootExists {
		return fmt.Sprintf("no root document; %d district documents", len(st.docs))
	}
	return fmt.Sprintf("root fence %s status %q writeState %q; manifest %d success, %d failed of %d; successfulDistricts %d; %d district documents (%d not yet recorded)",
		st.rootFence, st.rootStatus, st.writeState, st.count("success"), st.count("failed"), len(st.entries), len(st.successful), len(st.docs),
		len(notYetRecorded(st)))
}

// read reads the root, its manifest pages and every district document
// (their writerFence only) with a client of the emulator's own.
func (s *scenario) read() stored {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := s.client.Collection("snapshots").Doc(s.day())
	// A killed writer's last commits may land while the snapshot is read
	// (the emulator's read-only transactions do not hold them off): a
	// chunk's district documents, or a progress record in the root. What
	// is read is taken once two reads in a row found the same root and
	// the same documents.
	var last string
	for range 30 {
		st, sig := s.readOnce(ctx, root)
		if sig == last {
			return st
		}
		last = sig
		time.Sleep(200 * time.Millisecond)
	}
	s.t.Fatal("the snapshot kept changing while it was read")
	return stored{}
}

// readOnce reads the root, its manifest pages and the district documents
// in one read-only transaction (the root first: a district it records was
// committed before it, so it is among the documents read after), and
// returns what it read and a signature of it (update times and counts).
func (s *scenario) readOnce(ctx context.Context, root *firestore.DocumentRef) (stored, string) {
	s.t.Helper()
	var st stored
	var sig string
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		st = stored{date: s.day(), entries: map[string]string{}, docs: map[string]docInfo{}, successful: map[string]bool{}, failedList: map[string]bool{}}
		var rootUpdated, lastDoc time.Time
		snap, err := tx.Get(root)
		switch {
		case err == nil:
			st.rootExists = true
			rootUpdated = snap.UpdateTime
			md, _ := snap.Data()["metadata"].(map[string]any)
			st.rootFence, _ = md["writerFence"].(string)
			st.rootStatus, _ = md["status"].(string)
			st.writeState, _ = md["writeState"].(string)
			st.writeComplete, _ = md["writeComplete"].(bool)
			for field, set := range map[string]map[string]bool{"successfulDistricts": st.successful, "failedDistricts": st.failedList} {
				list, _ := md[field].([]any)
				for _, x := range list {
					id, _ := x.(string)
					set[id] = true
				}
			}
			mf, _ := snap.Data()["manifest"].(map[string]any)
			list, _ := mf["districts"].([]any)
			for _, x := range list {
				e, _ := x.(map[string]any)
				id, _ := e["districtId"].(string)
				entry, _ := e["status"].(string)
				st.entries[id] = entry
			}
			if mf["entriesIn"] == "pages" {
				// The paged form: the entries live in manifest pages,
				// {id, st} each.
				st.paged = true
				pages, err := tx.Documents(root.Collection("manifest")).GetAll()
				if err != nil {
					return fmt.Errorf("reading the manifest pages: %w", err)
				}
				for _, p := range pages {
					lastDoc = maxTime(lastDoc, p.UpdateTime)
					list, _ := p.Data()["districts"].([]any)
					for _, x := range list {
						e, _ := x.(map[string]any)
						id, _ := e["id"].(string)
						entry, _ := e["st"].(string)
						st.entries[id] = entry
					}
				}
			}
		case status.Code(err) == codes.NotFound:
		default:
			return fmt.Errorf("reading the root: %w", err)
		}
		docs, err := tx.Documents(root.Collection("districts").Select("writerFence")).GetAll()
		if err != nil {
			return fmt.Errorf("reading the district documents: %w", err)
		}
		for _, d := range docs {
			f, _ := d.Data()["writerFence"].(string)
			st.docs[strings.TrimPrefix(d.Ref.ID, "district_")] = docInfo{fence: f, updated: d.UpdateTime}
			lastDoc = maxTime(lastDoc, d.UpdateTime)
		}
		sig = fmt.Sprintf("%v %s %d %d %s", st.rootExists, rootUpdated.Format(time.RFC3339Nano), len(st.entries), len(st.docs), lastDoc.Format(time.RFC3339Nano))
		return nil
	}, firestore.ReadOnly)
	if err != nil {
		s.t.Fatal(err)
	}
	return st, sig
}

// manifestOpts loosens checkManifest where the scenario requires it.
type manifestOpts struct {
	// repairedFrom: fences of writers whose districts a repair, or a
	// rerun over their unfinished write, kept (they write only what is
	// not stored, so those documents keep their writer's fence).
	repairedFrom []string
}

// checkManifest checks the manifest against the documents actually
// present (manifestProblems) and fails the scenario if it is not exact.
func (s *scenario) checkManifest(st stored, o manifestOpts) bool {
	s.t.Helper()
	bad := manifestProblems(st, o)
	if len(bad) > 0 {
		s.t.Errorf("manifest is not exact (%s):\n%s", st, firstLines(bad, 10))
		return false
	}
	return true
}

// notYetRecorded lists the districts written but not yet recorded: while
// the root says writing, a "failed" ("not written yet") entry whose
// document carries the root's writerFence. The root's writer stored it
// and had not committed its record (it records progress at most once per
// --record-interval) when it died or was read; repair or a rerun records
// it without writing it again. Once the root says finished there are
// none: such a district is then a problem (manifestProblems).
func notYetRecorded(st stored) []string {
	if !st.rootExists || !st.writing() || st.rootFence == "" {
		return nil
	}
	var ids []string
	for id, entry := range st.entries {
		if d, ok := st.docs[id]; ok && entry == "failed" && d.fence == st.rootFence {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// overClaims lists the districts the root (its manifest entries, or its
// metadata.successfulDistricts) records as written whose document is not
// stored: what the application's getSnapshot would fail on. The root must
// never say more than what is stored, at any moment.
func overClaims(st stored) []string {
	var bad []string
	claimed := map[string]bool{}
	for id, entry := range st.entries {
		if entry == "success" {
			claimed[id] = true
		}
	}
	for id := range st.successful {
		claimed[id] = true
	}
	for id := range claimed {
		if _, ok := st.docs[id]; !ok {
			bad = append(bad, id)
		}
	}
	sort.Strings(bad)
	return bad
}

// manifestProblems lists where the root is not exact. The root never
// over-claims: every "success" entry must have its document, carrying the
// root's writerFence (or the fence of a writer whose districts a repair
// or rerun kept). Once the root says finished it is exact: no "failed"
// entry may have a document carrying the root's writerFence. While it
// says writing (its writer at work, or killed before its finish) it may
// under-claim: such a document is written but not yet recorded
// (notYetRecorded), which is allowed — never the reverse. Entries are only
// "success" or "failed" (the application's vocabulary), status only
// success, partial or failed; metadata.successfulDistricts names exactly
// the "success" entries, failedDistricts none of them.
func manifestProblems(st stored, o manifestOpts) []string {
	if !st.rootExists {
		return []string{fmt.Sprintf("no root document snapshots/%s", st.date)}
	}
	var bad []string
	if st.rootFence == "" {
		bad = append(bad, "the root has no metadata.writerFence")
	}
	if st.rootStatus != "success" && st.rootStatus != "partial" && st.rootStatus != "failed" {
		bad = append(bad, fmt.Sprintf("metadata.status %q: not the application's vocabulary", st.rootStatus))
	}
	if st.writeState != "writing" && st.writeState != "finished" {
		bad = append(bad, fmt.Sprintf("metadata.writeState %q: neither writing nor finished", st.writeState))
	}
	if st.writing() && st.rootStatus != "partial" {
		bad = append(bad, fmt.Sprintf("metadata.status %q while writeState is writing", st.rootStatus))
	}
	okFence := map[string]bool{st.rootFence: true}
	for _, f := range o.repairedFrom {
		if f != "" {
			okFence[f] = true
		}
	}
	ids := make([]string, 0, len(st.entries))
	for id := range st.entries {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		d, exists := st.docs[id]
		switch entry := st.entries[id]; entry {
		case "success":
			switch {
			case !exists:
				bad = append(bad, fmt.Sprintf("district %s: manifest says success, no document (over-claim)", id))
			case !okFence[d.fence]:
				bad = append(bad, fmt.Sprintf("district %s: manifest says success, document carries writerFence %q, root %q", id, d.fence, st.rootFence))
			}
		case "failed":
			if exists && d.fence == st.rootFence && !st.writing() {
				bad = append(bad, fmt.Sprintf("district %s: manifest says failed, document carries the root's writerFence %s (writeState %q)", id, d.fence, st.writeState))
			}
		default:
			bad = append(bad, fmt.Sprintf("district %s: manifest status %q: not the application's vocabulary", id, entry))
		}
		if ok := st.entries[id] == "success"; st.successful[id] != ok || st.failedList[id] == ok {
			bad = append(bad, fmt.Sprintf("district %s: manifest %q, in successfulDistricts %v, in failedDistricts %v", id, st.entries[id], st.successful[id], st.failedList[id]))
		}
	}
	if len(st.successful) != st.count("success") {
		bad = append(bad, fmt.Sprintf("successfulDistricts lists %d districts, the manifest %d", len(st.successful), st.count("success")))
	}
	for id := range st.successful {
		if _, listed := st.entries[id]; !listed {
			bad = append(bad, fmt.Sprintf("district %s: in successfulDistricts, not in the manifest", id))
		}
	}
	return bad
}

func firstLines(lines []string, n int) string {
	if len(lines) <= n {
		return strings.Join(lines, "\n")
	}
	return strings.Join(lines[:n], "\n") + fmt.Sprintf("\n… and %d more", len(lines)-n)
}

// checkAllFence checks that the root and every district document carry
// fence (the writer that must own the whole snapshot).
func (s *scenario) checkAllFence(st stored, fence, who string) bool {
	s.t.Helper()
	if bad := fenceProblems(st, fence, who); len(bad) > 0 {
		s.t.Errorf("%s", strings.Join(bad, "\n"))
		return false
	}
	return true
}

func fenceProblems(st stored, fence, who string) []string {
	if fence == "" {
		return []string{fmt.Sprintf("%s's fence is unknown (no \"snapshot lock acquired\" line)", who)}
	}
	var bad []string
	if st.rootFence != fence {
		bad = append(bad, fmt.Sprintf("the root carries writerFence %q, want %s's %s", st.rootFence, who, fence))
	}
	var other []string
	for id, d := range st.docs {
		if d.fence != fence {
			other = append(other, fmt.Sprintf("%s (%q)", id, d.fence))
		}
	}
	if len(other) > 0 {
		sort.Strings(other)
		bad = append(bad, fmt.Sprintf("%d of %d district documents do not carry %s's writerFence %s: %s",
			len(other), len(st.docs), who, fence, strings.Join(other[:min(len(other), 10)], ", ")))
	}
	return bad
}

// checkNoLocks checks that no lock document is left in Firestore.
func (s *scenario) checkNoLocks() bool {
	s.t.Helper()
	if left := s.locksLeft(); len(left) > 0 {
		s.t.Errorf("%d lock document(s) left behind: %s", len(left), strings.Join(left, "; "))
		return false
	}
	return true
}

// locksLeft describes the documents of the locks collection.
func (s *scenario) locksLeft() []string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	docs, err := s.client.Collection("locks").Documents(ctx).GetAll()
	if err != nil {
		s.t.Fatalf("reading the locks: %v", err)
	}
	var left []string
	for _, d := range docs {
		left = append(left, fmt.Sprintf("%s %v", d.Ref.ID, d.Data()))
	}
	return left
}

// checkFinal is the whole operator check after processes that ended
// normally: get == want, an exact manifest without pending entries, and no
// lock left. It returns what is stored.
func (s *scenario) checkFinal(want *input, o manifestOpts) stored {
	s.t.Helper()
	s.checkGet(want)
	st := s.read()
	s.checkManifest(st, o)
	if n := len(st.entries); st.rootExists && n != len(want.snap.Payload.Districts) {
		s.t.Errorf("the manifest has %d entries, the input %d districts", n, len(want.snap.Payload.Districts))
	}
	s.checkNoLocks()
	return st
}

// sleepUntil sleeps until t.
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

// memData is the data of district d, for a test to read or change.
func memData(d model.DistrictStatistics) model.Object {
	data, err := d.Data()
	if err != nil {
		panic(fmt.Sprintf("district %s: %v", d.DistrictID, err))
	}
	return data
}
