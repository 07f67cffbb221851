package snapshot

// Dry runs: what a Write or Repair would do, worked out by the code they
// run (the root builder, paging, chunking, the lock key, repair's
// decision), from reads only — no lock, no transaction, no write.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/gate"
	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// PlanAction is what a planned write or repair does with the snapshot.
type PlanAction string

// The actions of a Plan.
const (
	// PlanWrite: the whole snapshot is written (the root, then every
	// district).
	PlanWrite PlanAction = "write"
	// PlanResume: a Write finds an unfinished write of this same input
	// stored and completes it: it writes only Plan.Rewrite.
	PlanResume PlanAction = "resume"
	// PlanRepair: a Repair writes only Plan.Rewrite and keeps the other
	// districts as they are stored.
	PlanRepair PlanAction = "repair"
	// PlanSkip: nothing is written; the stored snapshot is complete.
	PlanSkip PlanAction = "skip"
	// PlanHeld: nothing is written; the publication gate (WithGate) holds
	// the input, as Plan.Gate says.
	PlanHeld PlanAction = "held"
)

// StoredNone is Plan.Stored for a date with no root document.
const StoredNone = "none"

// Manifest forms (PlanManifest.Form).
const (
	ManifestInline = "inline"
	ManifestPages  = "pages"
)

// Plan is what a write or repair of one snapshot would do, as a dry run
// reports it (Planner.Plan, Planner.PlanRepair); its JSON is the output of
// `snapwriter write --dry-run --json`.
type Plan struct {
	SnapshotID string `json:"snapshotId"`
	// Op is "write" or "repair".
	Op string `json:"op"`
	// Action is what the op does with the stored snapshot, and Why says
	// why, in a sentence.
	Action PlanAction `json:"action"`
	Why    string     `json:"why"`
	// Stored is the state of the snapshot stored under the date now
	// (a Summary's State: complete, partial, writing — which a dead
	// writer's interrupted write also shows as —, unsuccessful), or
	// StoredNone.
	Stored string `json:"stored"`
	// Districts is the input's district count; DistrictsToWrite those the
	// op writes, DistrictsKept those it records as they are stored.
	Districts        int `json:"districts"`
	DistrictsToWrite int `json:"districtsToWrite"`
	DistrictsKept    int `json:"districtsKept"`
	// StaleDeletes counts the stored district documents the input does
	// not have, which the write deletes in its chunks.
	StaleDeletes int `json:"staleDeletes"`
	// Chunks is the number of chunk transactions, of at most BatchSize
	// operations (district writes and stale deletes) each.
	BatchSize int          `json:"batchSize"`
	Chunks    int          `json:"chunks"`
	Manifest  PlanManifest `json:"manifest"`
	// RootBytes is the root document as first written, every district not
	// written yet, in Firestore's storage size (its fields'), against
	// RootLimitBytes (1 MiB); RootBytesComplete the root as recorded once
	// every district is written.
	RootBytes         int      `json:"rootBytes"`
	RootBytesComplete int      `json:"rootBytesComplete"`
	RootLimitBytes    int      `json:"rootLimitBytes"`
	Lock              PlanLock `json:"lock"`
	// Rewrite lists, in input order, the districts a repair or resume
	// writes and why; empty for a whole write (every district) or a skip.
	Rewrite []PlannedDistrict `json:"rewrite"`
	// Gate is the publication gate's report (WithGate) as a write would
	// get it now; nil when the gate is off or does not run (a repair, a
	// skip).
	Gate *gate.Report `json:"gate,omitempty"`
}

// PlanManifest is the form of the manifest a write records.
type PlanManifest struct {
	// Form is ManifestInline (the entries in the root) or ManifestPages.
	Form string `json:"form"`
	// Pages is the number of manifest pages, of PageSize entries each.
	Pages    int `json:"pages"`
	PageSize int `json:"pageSize,omitempty"`
}

// PlanLock is the lock a write would take.
type PlanLock struct {
	Backend string `json:"backend"`
	// Key is the lock key, computed from the caller's own flags (the
	// date, collection, project and database), as `snapwriter lock status
	// --date` shows it. Print it; never log it: logs carry KeyHash.
	Key     string `json:"key"`
	KeyHash string `json:"keyHash"`
}

// PlannedDistrict is a district a repair writes again, and why.
type PlannedDistrict struct {
	DistrictID string        `json:"districtId"`
	Reason     RewriteReason `json:"reason"`
}

// Planner plans writes and repairs without writing: it reads what is
// stored, takes no lock and opens no lock backend (on PostgreSQL, opening
// one creates its tables).
type Planner struct {
	w *Writer
}

// NewPlanner returns a Planner of the writes a Writer of client and opts
// makes under the lock backend named lockBackend
// (locking.Capabilities.Backend: "firestore", "postgres"). Its options are
// a Writer's, checked as NewWriter checks them.
func NewPlanner(client *firestore.Client, lockBackend string, opts ...Option) (*Planner, error) {
	if client == nil {
		return nil, errors.New("snapshot: a Firestore client is required")
	}
	w, err := configure(client, lockBackend, opts)
	if err != nil {
		return nil, err
	}
	return &Planner{w: w}, nil
}

// Planner is the Planner of w's writes.
func (w *Writer) Planner() *Planner { return &Planner{w: w} }

// planFence stands for the fence a write would get: a fence's width (15
// digits), so that the documents a plan sizes are as large as the write's.
const planFence = "000000000000000"

// Plan is what Write(ctx, id, snap) would do now. It validates snap as
// Write does (model.ErrInvalid) and reads the stored root, manifest pages
// and district documents (each read bounded by WithRequestTimeout), but
// writes nothing and takes no lock. Stored
// roots Write would refuse are refused alike (ErrLockBackendSwitch,
// ErrLockKeySwitch). What it cannot know is what happens under the lock:
// a live writer (ErrLockHeld), a newer fence, a failing chunk.
func (p *Planner) Plan(ctx context.Context, id string, snap *model.Snapshot) (*Plan, error) {
	return p.plan(ctx, opWrite, id, snap)
}

// PlanRepair is what Repair(ctx, id, snap) would do now, as Plan is for
// Write: the districts it writes again and why (Plan.Rewrite), decided by
// the code Repair runs. An input Repair refuses is refused alike
// (ErrMismatch).
func (p *Planner) PlanRepair(ctx context.Context, id string, snap *model.Snapshot) (*Plan, error) {
	return p.plan(ctx, opRepair, id, snap)
}

func (p *Planner) plan(ctx context.Context, op operation, id string, snap *model.Snapshot) (*Plan, error) {
	w := p.w
	prep, err := model.PrepareWrite(snap, id)
	if err != nil {
		return nil, err
	}
	pl, err := w.newPlan(op, id)
	if err != nil {
		return nil, err
	}
	in, err := w.buildInput(id, snap, prep, layout.Stamp{WriterFence: planFence, WriterLockKeyHash: pl.Lock.KeyHash}, w.cfg.now())
	if err != nil {
		return nil, err
	}
	in.Repairing = op == opRepair
	w.paginate(&in)
	pl.Districts = len(snap.Payload.Districts)
	if op == opWrite {
		// As the write runs it, first, but without the lock: another
		// writer may still change what it compares with.
		if pl.Gate, err = w.checkGate(ctx, id, snap); err != nil {
			return nil, withID(id, err)
		}
		if pl.Gate != nil && pl.Gate.Held {
			pl.Action, pl.Why = PlanHeld, "the input is not what readers may be shown without a look (see the gate's report)"
			return pl, nil
		}
	}
	rctx, cancel := context.WithTimeout(ctx, w.cfg.reqTimeout)
	names := w.names(id)
	doc, err := names.Root.Get(rctx)
	cancel()
	if status.Code(err) == codes.NotFound {
		return pl, p.whole(ctx, pl, in, "nothing is stored under this date")
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: reading the root: %w", id, err)
	}
	root := layout.ReadRoot(doc)
	pl.Stored = string(storedState(id, root))
	// In writeRoot's order: the skip, then the prior writer's check.
	if op == opWrite && w.cfg.skipComplete && root.Complete() {
		return pl.skip("the stored snapshot is complete, and complete snapshots are skipped"), nil
	}
	if _, err := w.checkSwitch(root.Meta(), in); err != nil {
		return nil, withID(id, err)
	}
	resume := op == opWrite
	if resume && !resumable(root, in) {
		return pl, p.whole(ctx, pl, in, "the stored snapshot is replaced")
	}
	// As takeOver decides, from the same reads.
	rctx, cancel = context.WithTimeout(ctx, w.cfg.reqTimeout)
	pages, err := names.Pages.Documents(rctx).GetAll()
	cancel()
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: reading manifest pages: %w", id, err)
	}
	inData := newInputData(in.Snap, in.DataHashes, in.Repairing)
	rctx, cancel = context.WithTimeout(ctx, w.cfg.reqTimeout)
	stored, err := readStoredDistricts(clientDocs(names.Districts.Documents(rctx)), inData)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: reading the district documents: %w", id, err)
	}
	dec, err := in.decideRepair(root, layout.SnapshotPages(pages), inData, stored, resume || w.cfg.rewriteChanged)
	switch {
	case errors.Is(err, errReplace):
		return pl, p.whole(ctx, pl, in, "the input's root payload differs from the stored one, and what differs is re-written")
	case resume && errors.Is(err, ErrMismatch):
		return pl, p.whole(ctx, pl, in, "the stored unfinished write has other districts")
	case errors.Is(err, errSkip):
		return pl.skip("the stored snapshot is complete and intact"), nil
	case err != nil:
		return nil, withID(id, err)
	}
	pl.Action, pl.Why = PlanRepair, "the districts not stored intact are written again"
	if resume {
		pl.Action, pl.Why = PlanResume, "the stored snapshot is an unfinished write of this input: the districts it stored are kept"
	}
	for _, d := range snap.Payload.Districts {
		if r, ok := dec.rewrite[d.DistrictID]; ok {
			pl.Rewrite = append(pl.Rewrite, PlannedDistrict{DistrictID: d.DistrictID, Reason: r})
		}
	}
	return pl, p.fill(ctx, pl, in.keeping(dec.kept), dec.todo())
}

// Skipped is the plan of a write of snapshot id that is known to be
// skipped, for why (a backfill with --skip-complete, which found the date
// complete and does not read its input): it writes nothing, and only the
// lock is filled in. No read is made.
func (p *Planner) Skipped(id, why string) (*Plan, error) {
	pl, err := p.w.newPlan(opWrite, id)
	if err != nil {
		return nil, err
	}
	pl.Stored, pl.Manifest = string(StateComplete), PlanManifest{Form: ManifestInline}
	return pl.skip(why), nil
}

// newPlan is the plan of op on snapshot id before anything is known of
// the input or what is stored: the writer's limits and the lock.
func (w *Writer) newPlan(op operation, id string) (*Plan, error) {
	key, err := w.scope.LockKey(w.lockName, id)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	return &Plan{SnapshotID: id, Op: string(op), Stored: StoredNone, BatchSize: w.chunkOps(),
		RootLimitBytes: model.MaxDocumentBytes, Rewrite: []PlannedDistrict{},
		Lock: PlanLock{Backend: w.lockName, Key: key, KeyHash: locking.HashKey(key)}}, nil
}

// skip makes pl a plan that writes nothing.
func (pl *Plan) skip(why string) *Plan {
	pl.Action, pl.Why = PlanSkip, why
	return pl
}

// whole makes pl the plan of a whole write of in.
func (p *Planner) whole(ctx context.Context, pl *Plan, in rootInput, why string) error {
	pl.Action, pl.Why = PlanWrite, why
	return p.fill(ctx, pl, in, nil)
}

// fill sets what pl writes: the districts of todo (every one when nil),
// the stale deletes, the chunks, the manifest's form and the root's sizes.
func (p *Planner) fill(ctx context.Context, pl *Plan, in rootInput, todo map[string]bool) error {
	w := p.w
	ops := in.ops(todo)
	rctx, cancel := context.WithTimeout(ctx, w.cfg.reqTimeout)
	stale, err := w.staleDistricts(rctx, in.ID, in.Snap)
	cancel()
	if err != nil {
		return fmt.Errorf("snapshot %s: listing the district documents: %w", in.ID, err)
	}
	chunks, err := w.chunks(withDeletes(ops, stale))
	if err != nil {
		return fmt.Errorf("snapshot %s: planning chunks: %w", in.ID, err)
	}
	pl.DistrictsToWrite, pl.DistrictsKept, pl.StaleDeletes, pl.Chunks = len(ops), len(in.Kept), len(stale), len(chunks)
	first, pages, err := in.RootDoc()
	if err != nil {
		return err
	}
	pl.Manifest = PlanManifest{Form: ManifestInline}
	if in.Paged() {
		pl.Manifest = PlanManifest{Form: ManifestPages, Pages: len(pages), PageSize: in.PageSize}
	}
	done, err := in.finishedRoot(first, w.cfg.now())
	if err != nil {
		return err
	}
	pl.RootBytes, pl.RootBytesComplete = rootSize(first), rootSize(done)
	return nil
}

// finishedRoot is root, the root as first written, as the finish records
// it when every district was written: its metadata and manifest replaced
// as recordOutcome replaces them.
func (in rootInput) finishedRoot(root layout.Root, now time.Time) (layout.Root, error) {
	st := layout.State{Status: in.Snap.Status, Complete: true, Entries: map[string]string{}, Modified: now, FinishedAt: now}
	for _, d := range in.Snap.Payload.Districts {
		if _, kept := in.Kept[d.DistrictID]; !kept {
			st.Entries[d.DistrictID] = layout.EntrySuccess
		}
	}
	md, err := in.Metadata(st)
	if err != nil {
		return layout.Root{}, err
	}
	root.Metadata = &md
	root.Manifest, _ = in.Split(in.Manifest(st))
	return root, nil
}

// rootSize is root's size as Firestore counts it, its fields' (the
// document's name and 32 bytes more count towards the 1 MiB too).
func rootSize(root layout.Root) int { return model.FirestoreSize(layout.EncodeFields(root)) }

// storedState is the State of a stored root, a write at work on it (or
// interrupted: only its lock tells them apart) StateWriting.
func storedState(id string, root *layout.Root) State {
	s := summaryOf(id, root)
	if s.State == StateUnknown && s.writing() {
		return StateWriting
	}
	return s.State
}

// maxTextIDs bounds the district ids WriteText lists per reason.
const maxTextIDs = 30

// text says what action a does, for WriteText.
func (a PlanAction) text() string {
	switch a {
	case PlanWrite:
		return "the whole snapshot would be written"
	case PlanResume:
		return "the unfinished write of this input would be completed"
	case PlanRepair:
		return "the districts below would be written again"
	case PlanSkip:
		return "nothing would be written"
	case PlanHeld:
		return "nothing would be written: the publication gate holds it"
	}
	return string(a)
}

// WriteText prints pl for a terminal: a summary, then the districts a
// repair writes again and why.
func (pl *Plan) WriteText(out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "dry run of %s %s (nothing written, no lock taken): %s\n", pl.Op, pl.SnapshotID, pl.Action.text())
	fmt.Fprintf(tw, "  why:\t%s\n", pl.Why)
	fmt.Fprintf(tw, "  stored now:\t%s\n", pl.Stored)
	fmt.Fprintf(tw, "  districts:\t%d in the input; %d to write, %d kept as stored, %s to delete\n",
		pl.Districts, pl.DistrictsToWrite, pl.DistrictsKept, plural.N(pl.StaleDeletes, "stale document"))
	if pl.Action != PlanSkip && pl.Action != PlanHeld {
		fmt.Fprintf(tw, "  chunks:\t%d of at most %s\n", pl.Chunks, plural.N(pl.BatchSize, "operation"))
		form := pl.Manifest.Form
		if pl.Manifest.Form == ManifestPages {
			form = fmt.Sprintf("%s (%s of up to %d %s)", form, plural.N(pl.Manifest.Pages, "page"), pl.Manifest.PageSize, plural.Word(pl.Manifest.PageSize, "entry", "entries"))
		}
		fmt.Fprintf(tw, "  manifest:\t%s\n", form)
		fmt.Fprintf(tw, "  root document:\t%d bytes as first written, %d when complete (%.1f%% of the %d-byte limit)\n",
			pl.RootBytes, pl.RootBytesComplete, 100*float64(pl.RootBytes)/float64(pl.RootLimitBytes), pl.RootLimitBytes)
	}
	fmt.Fprintf(tw, "  lock:\t%s, key %s (key hash %s)\n", pl.Lock.Backend, pl.Lock.Key, pl.Lock.KeyHash)
	if err := tw.Flush(); err != nil {
		return err
	}
	if pl.Gate != nil {
		if err := pl.Gate.WriteText(out); err != nil {
			return err
		}
	}
	if len(pl.Rewrite) == 0 {
		return nil
	}
	byReason := map[RewriteReason][]string{}
	for _, d := range pl.Rewrite {
		byReason[d.Reason] = append(byReason[d.Reason], d.DistrictID)
	}
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, string(r))
	}
	slices.Sort(reasons)
	fmt.Fprintf(out, "  districts written again (%d):\n", len(pl.Rewrite))
	for _, r := range reasons {
		ids := byReason[RewriteReason(r)]
		more := ""
		if len(ids) > maxTextIDs {
			// --json lists them all.
			ids, more = ids[:maxTextIDs], fmt.Sprintf(" … and %d more", len(ids)-maxTextIDs)
		}
		if _, err := fmt.Fprintf(out, "    %s (%d): %s%s\n", r, len(byReason[RewriteReason(r)]), strings.Join(ids, " "), more); err != nil {
			return err
		}
	}
	return nil
}
