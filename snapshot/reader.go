package snapshot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// State is the state of a stored snapshot, as Summary.State reports it.
type State string

// States of a stored snapshot, as Summary.State reports them.
const (
	// StateComplete: every district was written and the snapshot's status
	// is "success": what the application's readers take as the newest
	// successful snapshot.
	StateComplete State = "complete"
	// StatePartial: the write finished with failed districts
	// (writeComplete false); the manifest records which, and
	// Writer.Repair completes it.
	StatePartial State = "partial"
	// StateUnsuccessful: every district was written, but the snapshot's
	// own status, from its input, is not "success" (its collection was
	// partial or failed): readers of successful snapshots skip it, and
	// there is nothing to repair.
	StateUnsuccessful State = "unsuccessful"
	// StateWriting: the root says "writing" and a live lock holds the
	// snapshot's key on the lock backend the root records (the key the
	// root's writerLockKeyHash names: LockScope.LockKey, or LegacyLockKey
	// for a root that records none): a writer is at work.
	StateWriting State = "writing"
	// StateInterrupted: the root says "writing" but no live lock holds the
	// key: the writer died before recording its outcome. Writer.Repair
	// completes it, or a new write replaces it.
	StateInterrupted State = "interrupted"
	// StateUnknown: the root says "writing" and its lock backend was not
	// given to the Reader (WithLockBackends), or the root records none, or
	// it records a lock key this Reader's scope does not give (another
	// snapwriter version), so whether a writer is alive cannot be told.
	StateUnknown State = "unknown"
	// StateDeleting: a prune marked the root (writeState "deleting",
	// status "failed") and is deleting the snapshot, or was stopped
	// midway; Writer.Prune, run again, finishes it. Readers skip it.
	StateDeleting State = "deleting"
)

// Reader reads snapshots back in the input format.
type Reader struct {
	client     *firestore.Client
	collection string
	backends   map[string]locking.Backend
	scope      LockScope // names the lock keys liveness is checked on
	scopeErr   error     // why scope could not be read from the client
	// readBudget is how long one read-only transaction of a view reads
	// (defaultReadOnlyBudget; tests shorten it).
	readBudget time.Duration
}

// ReaderOption configures a Reader.
type ReaderOption func(*Reader)

// WithLockBackends gives the Reader the lock backends it asks whether a
// snapshot whose root says "writing" has a live writer. Each serves the
// roots whose metadata.writerLockBackend is its Capabilities().Backend
// ("firestore", "postgres"); such a root is StateWriting while a live lock
// (whatever its fence) holds the snapshot's key on it — the key writers of
// the Reader's project, database and collection take
// (LockScope.LockKey), or LegacyLockKey(id) for a root written before keys
// named the document — and StateInterrupted when none does. A root whose
// backend is not among these is StateUnknown. The backends are only read.
func WithLockBackends(backends ...locking.Backend) ReaderOption {
	return func(r *Reader) {
		for _, b := range backends {
			if b != nil {
				r.backends[b.Capabilities().Backend] = b
			}
		}
	}
}

// NewReader returns a Reader of collection ("" means "snapshots").
func NewReader(client *firestore.Client, collection string, opts ...ReaderOption) *Reader {
	if collection == "" {
		collection = DefaultCollection
	}
	r := &Reader{client: client, collection: collection, backends: map[string]locking.Backend{}, readBudget: defaultReadOnlyBudget}
	for _, o := range opts {
		o(r)
	}
	r.scope, r.scopeErr = ScopeOf(client, collection)
	return r
}

// names are the names of snapshot id's documents.
func (r *Reader) names(id string) layout.Names {
	return layout.NewNames(r.client.Collection(r.collection), id)
}

// LockCheckError reports that asking a lock backend whether the write of a
// snapshot is live failed; Err is the backend's error.
type LockCheckError struct {
	SnapshotID string
	Backend    string // the root's writerLockBackend: "firestore", "postgres"
	Err        error
}

// Error names the snapshot and the backend, and says what failed.
func (e *LockCheckError) Error() string {
	return fmt.Sprintf("checking whether the write of snapshot %s is live (%s lock): %v", e.SnapshotID, e.Backend, e.Err)
}

// Unwrap returns the backend's error.
func (e *LockCheckError) Unwrap() error { return e.Err }

// Summary describes one stored snapshot for listings.
type Summary struct {
	SnapshotID string `json:"snapshotId"`
	// State is StateComplete, StatePartial, StateUnsuccessful,
	// StateWriting, StateInterrupted, StateUnknown or StateDeleting: see WithLockBackends for how a root that says
	// "writing" is told apart.
	State  State  `json:"state"`
	Status string `json:"status"`
	// WriteState is the root's metadata.writeState: "writing",
	// "finished" or "deleting" (empty on roots of the application and of earlier
	// snapwriter versions, which said "writing" in Status).
	WriteState string `json:"writeState,omitempty"`
	Districts  int    `json:"districts"`
	// FailedDistricts are the districts whose write failed: of a finished
	// root, every district it does not hold (metadata.writeFailedDistricts);
	// of a root that says "writing", those whose chunk failed for good.
	FailedDistricts []string `json:"failedDistricts"`
	// PendingDistricts are, of a root that says "writing" (StateWriting,
	// StateInterrupted, StateUnknown), the districts its writer has not
	// reached — or, when it died, never reached, or wrote in its last
	// moments without recording them: its manifest's "not written yet"
	// entries. Empty for every other root. A root that says "writing" holds
	// its other districts: Districts - len(FailedDistricts) -
	// len(PendingDistricts) are written.
	PendingDistricts []string `json:"pendingDistricts"`
	WriterFence      string   `json:"writerFence"`
	LockBackend      string   `json:"writerLockBackend,omitempty"`
	// LockKeyHash is the locking.HashKey of the lock key the writer held
	// (writerLockKeyHash; empty for roots of earlier snapwriter versions).
	LockKeyHash     string `json:"writerLockKeyHash,omitempty"`
	WriteFinishedAt string `json:"writeFinishedAt,omitempty"`
	// fromManifest: the district lists were read from the manifest, so
	// that PendingDistricts is told from FailedDistricts; a summary read
	// without the manifest (summaryFields) of a root that says "writing"
	// has its pending districts among the failed until readPending.
	fromManifest bool
}

// Get returns the snapshot stored under id, rebuilt in the input format.
// Districts whose write failed are absent; Summary says which. The root,
// its manifest pages and its districts are read as they were at one moment
// (see view): while a writer is at work, Get returns a state the snapshot
// had, and it never waits on a transaction a killed writer left open.
func (r *Reader) Get(ctx context.Context, id string) (*model.Snapshot, error) {
	ref := r.names(id).Root
	rd, v, err := r.openWhole(ctx, ref)
	if err != nil {
		return nil, err
	}
	docs, err := v.collection(ref, layout.DistrictsCollection).Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("reading districts of %s: %w", id, err)
	}
	written := rd.RecordedWritten()
	districts := make(map[string]model.Object, len(docs))
	for _, d := range docs {
		dd := layout.ReadDistrict(d)
		if dd.DistrictID == "" || dd.Status == layout.EntryFailed || written != nil && !written[dd.DistrictID] {
			continue
		}
		districts[dd.DistrictID] = dd.Data
	}
	s, err := layout.RootSnapshot(rd, districts)
	if err != nil {
		return nil, fmt.Errorf("decoding snapshot %s: %w", id, err)
	}
	return s, nil
}

// openWhole reads root document ref and, when its manifest is paged, its
// manifest pages in the root's view: the root with its manifest whole, and
// the view the snapshot's other reads go through. A missing root is
// ErrNotFound.
func (r *Reader) openWhole(ctx context.Context, ref *firestore.DocumentRef) (*layout.Root, view, error) {
	id := ref.ID
	doc, v, err := r.openRoot(ctx, ref)
	if status.Code(err) == codes.NotFound {
		return nil, v, fmt.Errorf("%s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, v, fmt.Errorf("reading snapshot %s: %w", id, err)
	}
	rd, err := readWhole(ctx, v, ref, doc)
	return rd, v, err
}

// readWhole is root document doc, read in v, with its manifest whole:
// its manifest pages, when it is paged, read in v too.
func readWhole(ctx context.Context, v view, ref *firestore.DocumentRef, doc *firestore.DocumentSnapshot) (*layout.Root, error) {
	rd := layout.ReadRoot(doc)
	if rd.Manifest.Paged() {
		pages, err := v.collection(ref, layout.PagesCollection).Documents(ctx).GetAll()
		if err != nil {
			return nil, fmt.Errorf("reading the manifest pages of %s: %w", ref.ID, err)
		}
		rd.ExpandPages(layout.SnapshotPages(pages))
	}
	return rd, nil
}

// District returns one district's statistics from snapshot id, as they
// appear in the input's payload.districts. A snapshot not stored is
// ErrNotFound; a district it does not have, or whose write failed, is
// ErrNoDistrict.
func (r *Reader) District(ctx context.Context, id, districtID string) (model.Object, error) {
	names := r.names(id)
	ref := names.Root
	doc, err := names.District(districtID).Get(ctx)
	if status.Code(err) == codes.NotFound {
		if _, rerr := ref.Get(ctx); status.Code(rerr) == codes.NotFound {
			return nil, fmt.Errorf("%s: %w", id, ErrNotFound)
		}
		return nil, fmt.Errorf("district %s of snapshot %s: %w", districtID, id, ErrNoDistrict)
	}
	if err != nil {
		return nil, fmt.Errorf("reading district %s of %s: %w", districtID, id, err)
	}
	dd := layout.ReadDistrict(doc)
	if dd.Status == layout.EntryFailed || dd.Data == nil {
		return nil, fmt.Errorf("district %s of snapshot %s: %w", districtID, id, ErrNoDistrict)
	}
	return dd.Data, nil
}

// Summary returns the listing entry of one snapshot.
func (r *Reader) Summary(ctx context.Context, id string) (*Summary, error) {
	doc, err := r.names(id).Root.Get(ctx)
	if status.Code(err) == codes.NotFound {
		return nil, fmt.Errorf("%s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", id, err)
	}
	s := summarize(doc)
	if err := r.describe(ctx, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// describe completes summary s as read: settles its state (settle) and,
// for a root that says "writing", tells its pending districts from its
// failed ones (readPending).
func (r *Reader) describe(ctx context.Context, s *Summary) error {
	if err := r.settle(ctx, s); err != nil {
		return err
	}
	return r.readPending(ctx, s)
}

// summaryFields are the root fields a Summary is made of.
var summaryFields = []string{
	layout.FieldPath(layout.FieldMetadata, layout.FieldStatus), layout.FieldPath(layout.FieldMetadata, layout.FieldWriteState),
	layout.FieldPath(layout.FieldMetadata, layout.FieldWriteComplete), layout.FieldPath(layout.FieldMetadata, layout.FieldWriteFailedDistricts),
	layout.FieldPath(layout.FieldMetadata, layout.FieldWriterFence), layout.FieldPath(layout.FieldMetadata, layout.FieldWriterLockBackend),
	layout.FieldPath(layout.FieldMetadata, layout.FieldWriterLockKeyHash), layout.FieldPath(layout.FieldMetadata, layout.FieldWriteFinishedAt),
	layout.FieldPath(layout.FieldMetadata, layout.FieldConfiguredDistricts), layout.FieldPath(layout.FieldManifest, layout.FieldTotalDistricts),
}

// latestFields are the root fields Latest reads of each root.
var latestFields = []string{
	layout.FieldPath(layout.FieldMetadata, layout.FieldStatus), layout.FieldPath(layout.FieldMetadata, layout.FieldWriteState), layout.FieldPath(layout.FieldMetadata, layout.FieldWriteComplete),
}

// List returns every snapshot, newest first. The scan runs in ascending id
// order and is reversed here: the emulator refuses descending key scans,
// and one summary per day is small. It reads the summary fields of each
// root, no manifest: only a root that says "writing" is read again whole
// (with its manifest pages), to tell its pending districts from its
// failed ones, so that a listing of finished snapshots reads what it
// always did.
func (r *Reader) List(ctx context.Context) ([]Summary, error) {
	it := r.client.Collection(r.collection).Select(summaryFields...).
		OrderBy(firestore.DocumentID, firestore.Asc).Documents(ctx)
	defer it.Stop()
	var out []Summary
	for {
		doc, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("listing snapshots: %w", err)
		}
		out = append(out, summarize(doc))
	}
	for i := range out {
		if err := r.describe(ctx, &out[i]); err != nil {
			return nil, err
		}
	}
	slices.Reverse(out)
	return out, nil
}

// settle decides the state of a root that says "writing": StateWriting
// while a live lock holds its key on the backend it records,
// StateInterrupted when none does, StateUnknown when that backend cannot
// be asked. Other roots are left as they are.
//
// A writer records its outcome before it unlocks, so a root read as
// "writing" whose lock is free may have been finished in between; and a
// new writer may have taken over. So when the lock is free the root is
// read again (whole: reread): only a root still "writing" under the same
// fence, whose writer therefore holds no lock, is interrupted, and s is
// then what that read found; a changed one is settled afresh.
func (r *Reader) settle(ctx context.Context, s *Summary) error {
	for range 3 {
		if !s.writing() {
			return nil
		}
		b := r.backends[s.LockBackend]
		if b == nil || s.LockBackend == "" {
			s.State = StateUnknown
			return nil
		}
		key, known, err := r.lockKey(s)
		if err != nil {
			return &LockCheckError{SnapshotID: s.SnapshotID, Backend: s.LockBackend, Err: err}
		}
		if !known {
			s.State = StateUnknown
			return nil
		}
		live, err := b.IsLocked(ctx, key)
		if err != nil {
			return &LockCheckError{SnapshotID: s.SnapshotID, Backend: s.LockBackend, Err: err}
		}
		if live {
			s.State = StateWriting
			return nil
		}
		fresh, err := r.reread(ctx, s.SnapshotID)
		if err != nil {
			return err
		}
		if fresh.writing() && fresh.sameWriter(s) {
			fresh.State = StateInterrupted
			*s = fresh
			return nil
		}
		*s = fresh
	}
	if s.writing() {
		// The root kept changing under us: writers are at work.
		s.State = StateWriting
	}
	return nil
}

// lockKey returns the key the writer of root s held on its lock backend:
// the key writers of this Reader's scope take, when the root records its
// hash; LegacyLockKey for a root that records none. known is false for a
// root recording another key, which this Reader cannot name.
func (r *Reader) lockKey(s *Summary) (key string, known bool, err error) {
	if s.LockKeyHash == "" {
		return LegacyLockKey(s.SnapshotID), true, nil
	}
	if r.scopeErr != nil {
		return "", false, r.scopeErr
	}
	key, err = r.scope.LockKey(s.LockBackend, s.SnapshotID)
	if err != nil {
		return "", false, err
	}
	return key, locking.HashKey(key) == s.LockKeyHash, nil
}

// sameWriter reports whether summaries s and o name the same writer: the
// same fence, on the same lock backend and key.
func (s *Summary) sameWriter(o *Summary) bool {
	return s.WriterFence == o.WriterFence && s.LockBackend == o.LockBackend && s.LockKeyHash == o.LockKeyHash
}

// reread reads one root again, whole — with its manifest pages, when
// paged, as they were at the root's read — and returns its summary, not
// settled, its district lists read from the manifest. Only roots that say
// "writing" are read again, and their manifest is what tells their
// pending districts from their failed ones.
func (r *Reader) reread(ctx context.Context, id string) (Summary, error) {
	root, _, err := r.openWhole(ctx, r.names(id).Root)
	if err != nil {
		return Summary{}, err
	}
	return summaryOf(id, root), nil
}

// readPending tells, in summary s of a root that says "writing" whose
// district lists were not read from its manifest (a List's projection, or
// a paged root read without its pages), its pending districts from its
// failed ones: the root is read again whole (reread). When that read finds
// it finished, or taken over by another writer, since s was settled, s is
// that read's summary, settled afresh.
func (r *Reader) readPending(ctx context.Context, s *Summary) error {
	if !s.writing() || s.fromManifest {
		return nil
	}
	fresh, err := r.reread(ctx, s.SnapshotID)
	if err != nil {
		return err
	}
	if fresh.writing() && fresh.sameWriter(s) {
		fresh.State = s.State
		*s = fresh
		return nil
	}
	*s = fresh
	return r.settle(ctx, s)
}

// Latest returns the id of the newest complete snapshot: status "success"
// and writeComplete not false (the application's writer leaves "success"
// on a partial write).
func (r *Reader) Latest(ctx context.Context) (string, error) {
	id, err := r.newestComplete(ctx, "")
	switch {
	case err != nil:
		return "", fmt.Errorf("finding the latest snapshot: %w", err)
	case id == "":
		return "", fmt.Errorf("no complete successful snapshot: %w", ErrNotFound)
	}
	return id, nil
}

// newestComplete is the id of the newest complete snapshot dated before
// before ("" for any date), "" when there is none. The roots with status
// "success" are read in ascending id order (see List), three fields each,
// and the last complete one wins.
func (r *Reader) newestComplete(ctx context.Context, before string) (string, error) {
	coll := r.client.Collection(r.collection)
	q := coll.Where(layout.FieldPath(layout.FieldMetadata, layout.FieldStatus), "==", layout.StatusSuccess)
	if before != "" {
		q = q.Where(firestore.DocumentID, "<", coll.Doc(before))
	}
	docs, err := q.Select(latestFields...).OrderBy(firestore.DocumentID, firestore.Asc).Documents(ctx).GetAll()
	if err != nil {
		return "", err
	}
	for i := len(docs) - 1; i >= 0; i-- {
		if layout.ReadRoot(docs[i]).Complete() {
			return docs[i].Ref.ID, nil
		}
	}
	return "", nil
}

// summarize is the Summary of a stored root (or of its summaryFields), its
// State not settled.
func summarize(doc *firestore.DocumentSnapshot) Summary {
	return summaryOf(doc.Ref.ID, layout.ReadRoot(doc))
}

// summaryOf is the Summary of snapshot id's root, read. The district
// lists of a root that says "writing" are read from its manifest entries
// when it has them (an inline root read whole, or a paged one with its
// pages expanded); otherwise, and for every other root, FailedDistricts
// is metadata.writeFailedDistricts.
func summaryOf(id string, root *layout.Root) Summary {
	md := root.Meta()
	s := Summary{SnapshotID: id, Status: md.Status, WriteState: md.WriteState, FailedDistricts: []string{},
		PendingDistricts: []string{}, WriterFence: md.WriterFence, LockBackend: md.WriterLockBackend,
		LockKeyHash: md.WriterLockKeyHash, WriteFinishedAt: md.WriteFinishedAt}
	if n := root.Manifest.TotalDistricts; n != nil {
		s.Districts = int(*n)
	} else if md.ConfiguredDistricts != nil {
		s.Districts = len(md.ConfiguredDistricts)
	}
	if entries := root.Manifest.Districts; s.writing() && len(entries) > 0 {
		for _, e := range entries {
			switch {
			case e.Status == layout.EntrySuccess:
			case e.Pending():
				s.PendingDistricts = append(s.PendingDistricts, e.DistrictID)
			default:
				s.FailedDistricts = append(s.FailedDistricts, e.DistrictID)
			}
		}
		s.fromManifest = true
	} else {
		s.FailedDistricts = append(s.FailedDistricts, md.WriteFailedDistricts...)
	}
	switch {
	case s.WriteState == layout.StateDeleting:
		s.State = StateDeleting
	case s.writing():
		s.State = StateUnknown // until settle asks the lock backend
	case !md.WrittenWhole():
		s.State = StatePartial
	case s.Status == layout.StatusSuccess:
		s.State = StateComplete
	default:
		s.State = StateUnsuccessful
	}
	return s
}

// writing reports whether the root says a write is at work on it (or was,
// when its writer died).
func (s *Summary) writing() bool { return layout.InProgress(s.WriteState, s.Status) }
