package snapshot

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/gate"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// compareBatch is how many districts a comparison reads and compares at
// once: the stored documents of one batch, read in one request, and the
// input's data of the same districts. A comparison of thousands of
// districts never holds more than one batch of either side's data.
const compareBatch = 100

// rows is one side of a comparison of two snapshots, district by
// district: the districts it has, their rankings rows, and a way to read
// their data a batch at a time.
type rows struct {
	id       string
	ids      map[string]bool
	rankings map[string]model.Object // district id → its row of the rankings
	// closing is whether the month-end closing rule applies to this side
	// as the newer one (gate.IsClosingPeriod of its metadata).
	closing bool
	// complete: a stored snapshot that is complete (Root.Complete).
	complete bool
	// read returns the data of districts ids (each of them in ids).
	read func(ctx context.Context, ids []string) (map[string]model.Object, error)
}

// inputRows is the input snap as one side of a comparison. Its data is
// the input's as the write would send it (DistrictStatistics.Data: a lazily
// read district is read again from its file, and refused if the file
// changed since it was checked), so the gate compares the bytes the write
// then writes.
func inputRows(id string, snap *model.Snapshot) rows {
	ds := make(map[string]model.DistrictStatistics, len(snap.Payload.Districts))
	for _, d := range snap.Payload.Districts {
		ds[d.DistrictID] = d
	}
	md := snap.Payload.Metadata
	return rows{
		id:       id,
		ids:      keySet(ds),
		rankings: rankingRows(snap.Rankings),
		closing:  gate.IsClosingPeriod(id, md.IsClosingPeriodData, md.CollectionDate),
		read: func(_ context.Context, ids []string) (map[string]model.Object, error) {
			out := make(map[string]model.Object, len(ids))
			for _, id := range ids {
				data, err := ds[id].Data()
				if err != nil {
					return nil, fmt.Errorf("reading district %s of the input: %w", id, err)
				}
				out[id] = data
			}
			return out, nil
		},
	}
}

// storedRows is stored snapshot root, read in view v, as one side of a
// comparison: the districts its manifest records as written, read in v.
func (r *Reader) storedRows(root *layout.Root, v view, names layout.Names) rows {
	ids := root.RecordedWritten()
	if ids == nil {
		ids = make(map[string]bool)
		for _, id := range root.Meta().SuccessfulDistricts {
			ids[id] = true
		}
	}
	var rankings model.Object
	if root.Rankings != nil {
		rankings = *root.Rankings
	}
	md := root.Meta()
	id := names.Root.ID
	return rows{
		id:       id,
		ids:      ids,
		rankings: rankingRows(rankings),
		closing:  gate.IsClosingPeriod(id, md.IsClosingPeriodData, md.CollectionDate),
		complete: root.Complete(),
		read: func(ctx context.Context, ids []string) (map[string]model.Object, error) {
			refs := make([]*firestore.DocumentRef, len(ids))
			for i, d := range ids {
				refs[i] = names.District(d)
			}
			out := make(map[string]model.Object, len(ids))
			err := v.getBatches(ctx, refs, len(refs), func(docs []*firestore.DocumentSnapshot) error {
				for _, doc := range docs {
					if !doc.Exists() {
						continue
					}
					d := layout.ReadDistrict(doc)
					out[d.DistrictID] = d.Data
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("reading districts of %s: %w", id, err)
			}
			for _, d := range ids {
				if out[d] == nil {
					return nil, fmt.Errorf("district %s of %s: the manifest records it written, but its document holds no data", d, id)
				}
			}
			return out, nil
		},
	}
}

// rankingRows are the rows of rankings (AllDistrictsRankingsData), by
// district id.
func rankingRows(rankings model.Object) map[string]model.Object {
	list, _ := rankings["rankings"].([]any)
	out := make(map[string]model.Object, len(list))
	for _, e := range list {
		if row, ok := e.(model.Object); ok {
			if id, ok := row["districtId"].(string); ok {
				out[id] = row
			}
		}
	}
	return out
}

func keySet[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// compare feeds check every district of older and newer: those in one
// only as added or removed, those in both with their data and rankings
// rows, read compareBatch at a time from both sides, each batch's reads
// within timeout (0: unbounded but for ctx).
func compare(ctx context.Context, check *gate.Check, older, newer rows, timeout time.Duration) error {
	var both []string
	for id := range older.ids {
		if newer.ids[id] {
			both = append(both, id)
		} else {
			check.District(id, &gate.Row{Ranking: older.rankings[id]}, nil)
		}
	}
	for id := range newer.ids {
		if !older.ids[id] {
			check.District(id, nil, &gate.Row{Ranking: newer.rankings[id]})
		}
	}
	slices.Sort(both)
	for batch := range slices.Chunk(both, compareBatch) {
		od, nd, err := readBatch(ctx, older, newer, batch, timeout)
		if err != nil {
			return err
		}
		for _, id := range batch {
			check.District(id, &gate.Row{Data: od[id], Ranking: older.rankings[id]}, &gate.Row{Data: nd[id], Ranking: newer.rankings[id]})
		}
	}
	return nil
}

// readBatch reads districts ids from both sides, within timeout.
func readBatch(ctx context.Context, older, newer rows, ids []string, timeout time.Duration) (od, nd map[string]model.Object, err error) {
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	if od, err = older.read(ctx, ids); err != nil {
		return nil, nil, err
	}
	nd, err = newer.read(ctx, ids)
	return od, nd, err
}

// withTimeout is ctx bounded by timeout, or ctx itself when timeout is 0.
func withTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, timeout)
}

// CompareInput compares snapshot storedID, as stored, with the input snap
// (a snapshot of date id), district by district, into a report: what diff
// prints. The stored snapshot is read as it was at one moment; a snapshot
// not stored is ErrNotFound. The month-end closing rule judges the
// changes when both are the same date and the input is a closing one.
func (r *Reader) CompareInput(ctx context.Context, storedID, id string, snap *model.Snapshot, o gate.Options) (*gate.Report, error) {
	older, _, err := r.openRows(ctx, storedID, view{})
	if err != nil {
		return nil, err
	}
	return compareReport(ctx, older, inputRows(id, snap), o)
}

// CompareStored compares two stored snapshots, older and newer, district
// by district, into a report: both are read as they were at one moment,
// that of the first read of older's root. Either not stored is
// ErrNotFound.
func (r *Reader) CompareStored(ctx context.Context, olderID, newerID string, o gate.Options) (*gate.Report, error) {
	older, v, err := r.openRows(ctx, olderID, view{})
	if err != nil {
		return nil, err
	}
	newer, _, err := r.openRows(ctx, newerID, v)
	if err != nil {
		return nil, err
	}
	return compareReport(ctx, older, newer, o)
}

// compareReport is the report of comparing older with newer: the value
// rule's judgement of every district, with the closing rule when both are
// the same date and newer is a closing one.
func compareReport(ctx context.Context, older, newer rows, o gate.Options) (*gate.Report, error) {
	o.Closing = older.id == newer.id && newer.closing
	check := gate.NewCheck(newer.id, o)
	check.Stored(older.id)
	if err := compare(ctx, check, older, newer, 0); err != nil {
		return nil, err
	}
	return check.Report(), nil
}

// openRows opens stored snapshot id as one side of a comparison, read in
// view v, or, when v is the zero view, in the view of its root's read.
// It returns the view it reads in. A snapshot not stored is ErrNotFound.
func (r *Reader) openRows(ctx context.Context, id string, v view) (rows, view, error) {
	names := r.names(id)
	var root *layout.Root
	var err error
	if v.client == nil {
		root, v, err = r.openWhole(ctx, names.Root)
	} else {
		root, err = r.openWholeIn(ctx, names.Root, v)
	}
	if err != nil {
		return rows{}, v, err
	}
	return r.storedRows(root, v, names), v, nil
}

// openWholeIn is openWhole in view v: the root read at v's read time.
func (r *Reader) openWholeIn(ctx context.Context, ref *firestore.DocumentRef, v view) (*layout.Root, error) {
	doc, err := v.get(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", ref.ID, err)
	}
	if !doc.Exists() {
		return nil, fmt.Errorf("%s: %w", ref.ID, ErrNotFound)
	}
	return readWhole(ctx, v, ref, doc)
}

// newestCompleteBefore is the newest complete snapshot dated before id,
// and the districts it holds: what the application's readers took as the
// newest on the day before id. "" when there is none.
func (r *Reader) newestCompleteBefore(ctx context.Context, id string) (string, []string, error) {
	baseID, err := r.newestComplete(ctx, id)
	if err != nil {
		return "", nil, fmt.Errorf("finding the newest complete snapshot before %s: %w", id, err)
	}
	if baseID == "" {
		return "", nil, nil
	}
	base, _, err := r.openRows(ctx, baseID, view{})
	if err != nil {
		return "", nil, err
	}
	live := slices.Sorted(maps.Keys(base.ids))
	return base.id, live, nil
}

// Provenance is the gate's record of a snapshot it let through only by the
// month-end closing rule (WithGate): when, against what, and the deltas
// the rule allowed.
type Provenance struct {
	PassedBy      string              `json:"passedBy"`           // "closing"
	CheckedAt     time.Time           `json:"checkedAt"`          // when the gate compared
	Baseline      string              `json:"baseline,omitempty"` // the newest complete snapshot before it
	Compared      string              `json:"compared,omitempty"` // the stored version of the date it compared with
	AllowedDeltas int                 `json:"allowedDeltas"`      // how many changes the rule allowed
	Deltas        []gate.AllowedDelta `json:"deltas"`             // the first layout.MaxGateDeltas of them
}

// Provenance returns the gate's record of snapshot id as stored now: nil
// when the stored snapshot did not pass the gate by the closing rule (no
// record, or a record of an earlier write of the date, whose fence is not
// the root's). A snapshot not stored is ErrNotFound.
func (r *Reader) Provenance(ctx context.Context, id string) (*Provenance, error) {
	names := r.names(id)
	root, v, err := r.openRoot(ctx, names.Root)
	if status.Code(err) == codes.NotFound {
		return nil, fmt.Errorf("%s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", id, err)
	}
	return provenanceIn(ctx, v, names, layout.ReadRoot(root))
}

// provenanceIn is the gate's record of the snapshot whose root is root, read
// in v: nil unless it carries root's writer fence.
func provenanceIn(ctx context.Context, v view, names layout.Names, root *layout.Root) (*Provenance, error) {
	rec, err := v.get(ctx, names.Gate)
	if err != nil {
		return nil, fmt.Errorf("reading the gate's record of %s: %w", names.Root.ID, err)
	}
	if !rec.Exists() {
		return nil, nil
	}
	var g layout.GateRecord
	layout.DecodeFields(rec.Data(), &g)
	if g.WriterFence == "" || g.WriterFence != root.Meta().WriterFence {
		return nil, nil
	}
	p := &Provenance{PassedBy: g.PassedBy, Baseline: g.Baseline, Compared: g.Compared, AllowedDeltas: int(g.AllowedDeltas), Deltas: []gate.AllowedDelta{}}
	p.CheckedAt, _ = time.Parse(time.RFC3339Nano, g.CheckedAt)
	for _, d := range g.Deltas {
		p.Deltas = append(p.Deltas, gate.AllowedDelta{DistrictID: d.DistrictID, Field: d.Field, Class: gate.Class(d.Class),
			Old: gate.Value{V: d.Old, Present: true}, New: gate.Value{V: d.New, Present: true}})
	}
	return p, nil
}
