package layout

import (
	"fmt"
	"maps"
	"sort"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/model"
)

// Stored documents read into the layout types (see codec.go for how a
// stored value of an unexpected type, or a field an older document lacks,
// reads).

// ReadRoot is a stored root document; an empty Root when doc does
// not exist. Its manifest holds the entries of an inline root; those of a
// paged one are in its pages (ExpandPages).
func ReadRoot(doc *firestore.DocumentSnapshot) *Root {
	return DecodeRoot(doc.Data())
}

// DecodeRoot is ReadRoot of a root's fields as DocumentSnapshot.Data
// gives them.
func DecodeRoot(data map[string]any) *Root {
	var r Root
	DecodeFields(data, &r)
	return &r
}

// ReadPage is a stored manifest page.
func ReadPage(doc *firestore.DocumentSnapshot) Page {
	var p Page
	DecodeFields(doc.Data(), &p)
	return p
}

// ReadDistrict is a stored district document. Data is nil when the
// document has no data object.
func ReadDistrict(doc *firestore.DocumentSnapshot) District {
	var d District
	DecodeFields(doc.Data(), &d)
	return d
}

// ReadFence is a stored fence document (zero when doc does not exist).
func ReadFence(doc *firestore.DocumentSnapshot) Fence {
	var f Fence
	DecodeFields(doc.Data(), &f)
	return f
}

// Meta is the root's metadata: empty for a stored document that has none,
// which then reads as a root of no writer, not in progress.
func (r *Root) Meta() *Metadata {
	if r.Metadata == nil {
		return &Metadata{}
	}
	return r.Metadata
}

// Writing reports whether the metadata describes a write in progress or
// interrupted, in the current form or an earlier version's.
func (md *Metadata) Writing() bool { return InProgress(md.WriteState, md.Status) }

// CurrentForm reports whether the metadata is in this version's form (it
// has a writeState), whose manifest and lists are exact at every moment,
// rather than an earlier version's or the application's.
func (md *Metadata) CurrentForm() bool { return md.WriteState != "" }

// WrittenWhole reports whether the metadata records a write that finished
// with every district written (writeComplete not false: roots of the
// application's writer may lack the flag).
func (md *Metadata) WrittenWhole() bool {
	return (md.WriteComplete == nil || *md.WriteComplete) && !md.Writing()
}

// Legacy reports whether a complete root is still in an earlier
// snapwriter version's form (its snapshotId the input's, or no
// writeState): a repair brings it to the current form. The application's
// roots have no writerFence.
func (md *Metadata) Legacy() bool {
	return md.WriterFence != "" && !md.CurrentForm()
}

// Complete reports whether the root is a complete snapshot, as the
// application's readers take it: status "success", written whole, and no
// write at work on it.
func (r *Root) Complete() bool {
	md := r.Meta()
	return md.Status == StatusSuccess && md.WrittenWhole()
}

// InputID is the input's snapshot_id the root holds: inputSnapshotId, or,
// in roots from before snapshotId was the date, snapshotId.
func (md *Metadata) InputID() string {
	if md.InputSnapshotID != nil {
		return *md.InputSnapshotID
	}
	return md.SnapshotID
}

// Unrecorded reports whether a stored district written under fence, which
// the root does not record as written, was written by the writer the root
// names (its fence is the root's) while that write was at work: a district whose record the
// writer did not live to commit. Roots of earlier versions recorded every
// chunk with its commit and have no such districts.
func (md *Metadata) Unrecorded(fence string) bool {
	return md.WriterFence != "" && fence == md.WriterFence && md.CurrentForm() && md.Writing()
}

// RecordedWritten is the set of districts a root's manifest records as
// written, which is what the snapshot holds; nil for a root of an earlier
// snapwriter version whose write is in progress or interrupted, whose
// manifest records nothing yet. Documents it does not name (of an earlier
// write of the date, not yet replaced) are not the snapshot's. A paged
// root's pages must be expanded first.
func (r *Root) RecordedWritten() map[string]bool {
	md := r.Meta()
	if !md.CurrentForm() && md.Writing() {
		return nil
	}
	if md.WriteState == StateDeleting {
		// A prune is deleting it: nothing is the snapshot's any more (the
		// pages of a paged root are not rewritten by the mark).
		return map[string]bool{}
	}
	entries := r.Manifest.Districts
	if len(entries) == 0 {
		return nil // no manifest to go by
	}
	set := make(map[string]bool, len(entries))
	for _, e := range entries {
		if e.Status == EntrySuccess {
			set[e.DistrictID] = true
		}
	}
	return set
}

// RootSnapshot rebuilds the input-format Snapshot from a root document and
// the data of its district documents (district id → data). Roots written
// by the TypeScript application have no payloadMetadata; their payload
// metadata is rebuilt the way its reader does.
func RootSnapshot(root *Root, districts map[string]model.Object) (*model.Snapshot, error) {
	list := make([]any, 0, len(districts))
	for _, id := range ManifestOrder(root, districts) {
		if data := districts[id]; data != nil {
			list = append(list, data)
		} else {
			list = append(list, nil) // no data object: refused as a district
		}
	}
	return RootSnapshotList(root, len(districts), list)
}

// RootSnapshotList is RootSnapshot of a root whose districts' data, in
// order, are list, and which n district documents are read with (the count
// a root of the application's rebuilds its payload metadata with).
func RootSnapshotList(root *Root, n int, list []any) (*model.Snapshot, error) {
	md := root.Metadata
	if md == nil {
		return nil, fmt.Errorf("root document has no metadata")
	}
	// The input's own keys (model's JSON form), decoded by model.Decode
	// as an input file is.
	s := map[string]any{
		"snapshot_id":         md.InputID(),
		"created_at":          md.CreatedAt,
		"schema_version":      md.SchemaVersion,
		"calculation_version": md.CalculationVersion,
		"status":              md.Status,
		"errors":              nonNil(md.Errors),
	}
	pm := md.PayloadMetadata
	if pm == nil {
		var err error
		if pm, err = legacyPayloadMetadata(md, n); err != nil {
			return nil, fmt.Errorf("encoding stored payload metadata: %w", err)
		}
	}
	payload := map[string]any{"metadata": pm}
	if x := root.InputExtra; x != nil {
		maps.Copy(s, x.Snapshot)
		maps.Copy(payload, x.Payload)
	}
	payload["districts"] = list
	s["payload"] = payload
	if root.Rankings != nil {
		s["rankings"] = *root.Rankings
	}
	b, err := model.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encoding stored snapshot: %w", err)
	}
	return model.Decode(bytesReader(b))
}

// legacyPayloadMetadata mirrors the TypeScript reader for roots it wrote,
// which n district documents are read with: the input's optional fields
// only where the root has them.
func legacyPayloadMetadata(md *Metadata, n int) (model.Object, error) {
	pm := model.PayloadMetadata{
		Source:               md.Source,
		FetchedAt:            md.CreatedAt,
		DataAsOfDate:         md.DataAsOfDate,
		DistrictCount:        int64(n),
		ProcessingDurationMs: md.ProcessingDuration,
		ConfiguredDistricts:  md.ConfiguredDistricts,
		SuccessfulDistricts:  md.SuccessfulDistricts,
		FailedDistricts:      md.FailedDistricts,
		IsClosingPeriodData:  md.IsClosingPeriodData,
		CollectionDate:       md.CollectionDate,
		LogicalDate:          md.LogicalDate,
	}
	if md.DistrictErrors != nil {
		pm.DistrictErrors = *md.DistrictErrors
	}
	return toObject(pm)
}

// ManifestOrder lists the stored district ids in manifest order, then any
// district document the manifest does not name, sorted.
func ManifestOrder[V any](root *Root, districts map[string]V) []string {
	seen := map[string]bool{}
	var ids []string
	for _, e := range root.Manifest.Districts {
		if _, ok := districts[e.DistrictID]; ok && !seen[e.DistrictID] {
			seen[e.DistrictID] = true
			ids = append(ids, e.DistrictID)
		}
	}
	var rest []string
	for id := range districts {
		if !seen[id] {
			rest = append(rest, id)
		}
	}
	sort.Strings(rest)
	return append(ids, rest...)
}
