package layout

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/model"
)

// Input holds what the root document is built from, so the start and
// finish transactions write the same metadata.
type Input struct {
	ID        string
	Snap      *model.Snapshot
	Fence     string
	Backend   string
	KeyHash   string // the lock key's hash, which fences are comparable under
	StartedAt time.Time
	// The district documents are built when their chunk is written; only
	// their sizes and hashes are held (SummarizeDistricts), for the root's
	// manifest.
	DocSizes map[string]int    // district id → document size, for the manifest
	Hashes   map[string]string // district id → the hash of its document
	// DataHashes: district id → the hash of its data alone.
	DataHashes map[string]string
	OpBytes    map[string]int // district id → its document's size in a commit request
	// PayloadHash is the hash of the snapshot's own payload (PayloadHash).
	PayloadHash string
	// RootEstimate is the root's estimated size with its manifest inline,
	// which Paginate decides the manifest's form by, and RankingsSize the
	// rankings' size, for the manifest: both from validation
	// (model.PrepareWrite), which sized the root and the rankings once.
	RootEstimate, RankingsSize int
	// repairing: the write is a repair (the root says when it started and
	// when it was recorded).
	Repairing bool
	// kept: districts a repair leaves as they are stored, with what their
	// manifest entries say of the stored documents.
	Kept map[string]Kept
	// PageSize is the entries per manifest page of a paged manifest, 0
	// for the inline form (see Paginate); PageOf: district id → its page.
	PageSize int
	PageOf   map[string]int
}

// DistrictSummary is what a write needs of a district document before
// it is built (its data is read when its chunk is): its hash, the hash of
// its data, its size in the manifest and its size in a commit request.
type DistrictSummary struct {
	hash, dataHash string
	size, bytes    int
}

// SummarizeDistricts is every district's DistrictSummary
// (summarizeDistrict), in input order, from data, its data's summaries
// (model.PrepareWrite): the data was checked, sized and hashed in one
// walk, when the input was read or validated, and is not walked again
// here; only each district's small envelope is, once.
func SummarizeDistricts(s *model.Snapshot, data []model.DataSummary, fence string) ([]DistrictSummary, error) {
	ds := s.Payload.Districts
	if len(data) != len(ds) {
		return nil, fmt.Errorf("%d data %s for %s", len(data), plural.Word(len(data), "summary", "summaries"), plural.N(len(ds), "district"))
	}
	sums := make([]DistrictSummary, len(ds))
	var h docHasher
	for i, d := range ds {
		var err error
		if sums[i], err = h.summarizeDistrict(s, d, data[i], fence); err != nil {
			return nil, fmt.Errorf("district %s: %w", d.DistrictID, err)
		}
	}
	return sums, nil
}

// summarizeDistrict is d's DistrictSummary, from its data's summary sum
// and one walk of its envelope, the walk that hashes it (envelopeHash)
// and sizes it. The document's hash, size and commit size are exactly
// those of the whole document built (DistrictHashes, FirestoreSize,
// EncodedSize): both sizes of a map are sums over its members, so the
// document's are those of the envelope as hashed, with the data's hash
// replaced by the data and writerFence, which the hash leaves out, added.
func (h *docHasher) summarizeDistrict(s *model.Snapshot, d model.DistrictStatistics, sum model.DataSummary, fence string) (DistrictSummary, error) {
	dataHash := digestHash(sum.Digest)
	env := envelope(s, d, fence)
	hashed, err := h.summarize(env, dataHash)
	if err != nil {
		return DistrictSummary{}, err
	}
	const fenceKey = len(FieldWriterFence)
	fv := env[FieldWriterFence]
	return DistrictSummary{
		hash:     digestHash(hashed.Digest),
		dataHash: dataHash,
		size:     hashed.FirestoreSize - model.FirestoreSize(dataHash) + sum.FirestoreSize + fenceKey + 1 + model.FirestoreSize(fv),
		bytes:    hashed.EncodedSize - model.EncodedSize(dataHash) + sum.EncodedSize + fenceKey + 12 + model.EncodedSize(fv),
	}, nil
}

// Kept is the manifest's record of a stored district document
// that a repair keeps: when it was written, its hash and its size.
type Kept struct {
	Modified string
	Hash     string
	Size     int64
}

// State is what the root says of the write at one moment.
type State struct {
	Status     string            // metadata.status
	Writing    bool              // metadata.writeState: writing, else finished
	Complete   bool              // metadata.writeComplete
	Entries    map[string]string // district → manifest entry status; unset: kept, else not written yet
	Msgs       map[string]string // district → errorMessage of a failed entry
	Modified   time.Time         // lastModified of the entries set in entries, unless times has theirs
	Times      map[string]string // district → lastModified (IsoMillis) of its entry: when its chunk committed
	FinishedAt time.Time
}

// Stored reports whether district id's document holds this snapshot's
// version, as the root in state st records it.
func (in Input) Stored(st State, id string) bool {
	if e, ok := st.Entries[id]; ok {
		return e == EntrySuccess
	}
	_, kept := in.Kept[id]
	return kept
}

// Stamp is the Stamp of in's writer.
func (in Input) Stamp() Stamp {
	return Stamp{WriterFence: in.Fence, WriterLockBackend: in.Backend, WriterLockKeyHash: in.KeyHash}
}

// Metadata is the root's metadata for state st.
func (in Input) Metadata(st State) (Metadata, error) {
	s := in.Snap
	pm := s.Payload.Metadata
	ids := DistrictIDs(s)
	configured := pm.ConfiguredDistricts
	if configured == nil {
		configured = ids
	}
	successful := make([]string, 0, len(ids))
	notStored := make([]string, 0, len(ids))
	for _, id := range ids {
		if in.Stored(st, id) {
			successful = append(successful, id)
		} else {
			notStored = append(notStored, id)
		}
	}
	failed := make([]string, 0, len(pm.FailedDistricts)+len(notStored))
	seen := make(map[string]bool, cap(failed))
	for _, id := range append(slices.Clone(pm.FailedDistricts), notStored...) {
		if !seen[id] && !in.Stored(st, id) {
			seen[id] = true
			failed = append(failed, id)
		}
	}
	verbatim, err := toObject(pm)
	if err != nil {
		return Metadata{}, fmt.Errorf("encoding payload metadata: %w", err)
	}
	state := StateFinished
	if st.Writing {
		state = StateWriting
	}
	inputID, complete := s.SnapshotID, st.Complete
	md := Metadata{
		SnapshotID:           in.ID,
		InputSnapshotID:      &inputID,
		CreatedAt:            s.CreatedAt,
		SchemaVersion:        s.SchemaVersion,
		CalculationVersion:   s.CalculationVersion,
		Status:               st.Status,
		ConfiguredDistricts:  nonNil(configured),
		SuccessfulDistricts:  successful,
		FailedDistricts:      failed,
		Errors:               nonNil(s.Errors),
		ProcessingDuration:   pm.ProcessingDurationMs,
		Source:               pm.Source,
		DataAsOfDate:         pm.DataAsOfDate,
		IsClosingPeriodData:  pm.IsClosingPeriodData,
		CollectionDate:       pm.CollectionDate,
		LogicalDate:          pm.LogicalDate,
		WriteState:           state,
		WriteComplete:        &complete,
		WriteFailedDistricts: notStored,
		Stamp:                in.Stamp(),
		WriteStartedAt:       in.StartedAt.UTC().Format(time.RFC3339Nano),
		PayloadHash:          in.PayloadHash,
		PayloadMetadata:      verbatim,
	}
	if pm.DistrictErrors != nil {
		md.DistrictErrors = &pm.DistrictErrors
	}
	if !st.FinishedAt.IsZero() {
		md.WriteFinishedAt = st.FinishedAt.UTC().Format(time.RFC3339Nano)
	}
	if in.Repairing {
		md.RepairStartedAt = in.StartedAt.UTC().Format(time.RFC3339Nano)
		md.RepairedAt = md.WriteFinishedAt
	}
	if v, ok := rankingVersion(s.Rankings); ok {
		md.RankingVersion = &v
	}
	return md, nil
}

// entry is the manifest entry of district id.
func (in Input) entry(id, status, msg, modified string) manifestEntry {
	e := manifestEntry{DistrictID: id, FileName: DistrictDocID(id), Status: status,
		FileSize: int64(in.DocSizes[id]), ContentHash: in.Hashes[id], LastModified: modified}
	if status == EntryFailed {
		e.ErrorMessage = entryMessage(msg)
	}
	return e
}

// entryMessage is msg cut to model.MaxEntryMessageBytes on a character
// boundary. A chunk's error can run to hundreds of bytes (the lease's loss
// and its cause), and every district of the chunk carries it: uncut, a
// write that failed widely could no longer record its manifest in a root
// (or page) limited to 1 MiB. The whole error is in the write's Result and
// its log.
func entryMessage(msg string) string {
	const ellipsis = "…"
	if len(msg) <= model.MaxEntryMessageBytes {
		return msg
	}
	cut := model.MaxEntryMessageBytes - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + ellipsis
}

// pendingEntry is the entry of a district this write has not written yet,
// exactly as the root records it, so that the chunk writing the district
// can remove it by value.
func (in Input) pendingEntry(id string) manifestEntry {
	return in.entry(id, EntryFailed, NotWrittenYet, IsoMillis(in.StartedAt))
}

// Manifest is the manifest for state st.
func (in Input) Manifest(st State) Manifest {
	s := in.Snap
	m := Manifest{SnapshotID: in.ID, CreatedAt: s.CreatedAt, Districts: make([]manifestEntry, 0, len(s.Payload.Districts)),
		AllDistrictsRankings: rankingsEntry{Filename: rankingsFilename, Status: rankingsMissing}}
	var successful, failed int64
	modified := IsoMillis(st.Modified)
	for _, d := range s.Payload.Districts {
		id := d.DistrictID
		var e manifestEntry
		if status, set := st.Entries[id]; set {
			at, ok := st.Times[id]
			if !ok {
				at = modified
			}
			e = in.entry(id, status, st.Msgs[id], at)
		} else if k, kept := in.Kept[id]; kept {
			e = in.entry(id, EntrySuccess, "", k.Modified)
			e.ContentHash, e.FileSize = k.Hash, k.Size
		} else {
			e = in.pendingEntry(id)
		}
		if e.Status == EntrySuccess {
			successful++
		} else {
			failed++
		}
		m.Districts = append(m.Districts, e)
	}
	total := int64(len(s.Payload.Districts))
	m.TotalDistricts, m.SuccessfulDistricts, m.FailedDistricts = &total, &successful, &failed
	if s.Rankings != nil {
		m.AllDistrictsRankings.Size = int64(in.RankingsSize)
		m.AllDistrictsRankings.Status = rankingsPresent
	}
	return m
}

// RootDoc is the root document written before any district, and its
// manifest pages when paged: status "partial", writeState "writing", not
// complete, every district not written yet but those a repair keeps.
func (in Input) RootDoc() (Root, []Page, error) {
	st := State{Status: StatusPartial, Writing: true}
	md, err := in.Metadata(st)
	if err != nil {
		return Root{}, nil, err
	}
	mf, pages := in.Split(in.Manifest(st))
	doc := Root{Metadata: &md, Manifest: mf, InputExtra: InputExtra(in.Snap)}
	if in.Snap.Rankings != nil {
		doc.Rankings = &in.Snap.Rankings
	}
	return doc, pages, nil
}

// FenceDoc is the fence document's content for this writer.
func (in Input) FenceDoc(at time.Time) Fence {
	return Fence{Stamp: in.Stamp(), UpdatedAt: at.UTC().Format(time.RFC3339Nano)}
}

// InputExtra keeps fields of the input that the layout has no place for
// (nil when there are none).
func InputExtra(s *model.Snapshot) *ExtraFields {
	if len(s.Extra) == 0 && len(s.Payload.Extra) == 0 {
		return nil
	}
	return &ExtraFields{Snapshot: s.Extra, Payload: s.Payload.Extra}
}

// rankingVersion is the version the input's rankings (the user's payload,
// AllDistrictsRankingsData) name in their metadata.
func rankingVersion(r model.Object) (string, bool) {
	md, _ := r["metadata"].(map[string]any)
	v, ok := md["rankingVersion"].(string)
	return v, ok
}

// DistrictIDs lists the ids of s's districts, in input order.
func DistrictIDs(s *model.Snapshot) []string {
	ids := make([]string, len(s.Payload.Districts))
	for i, d := range s.Payload.Districts {
		ids[i] = d.DistrictID
	}
	return ids
}

// nonNil is ss, or an empty list for nil: Firestore stores a nil slice as
// null, and an absent array and an empty one differ to the application.
func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

// toObject converts a JSON-marshalable value into the canonical value tree.
func toObject(v any) (model.Object, error) {
	b, err := model.Marshal(v)
	if err != nil {
		return nil, err
	}
	var o model.Object
	if err := unmarshalCanonical(b, &o); err != nil {
		return nil, err
	}
	return o, nil
}

func unmarshalCanonical(b []byte, o *model.Object) error {
	obj, err := model.DecodeObject(bytesReader(b))
	if err != nil {
		return err
	}
	*o = obj
	return nil
}

// bytesReader reads b: stored values' canonical JSON, decoded back here and
// in read.go.
func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// HashUnder is the hash district id's document has when written from this
// input under fence: the hash in.hashes holds for this writer's fence, and
// for another's (a writer that died before recording it) the same
// envelope and data stamped with that fence. "" when it cannot be told.
func (in Input) HashUnder(id, fence string) string {
	if fence == in.Fence {
		return in.Hashes[id]
	}
	dh, ok := in.DataHashes[id]
	if !ok {
		return ""
	}
	h, err := new(docHasher).envelopeHash(envelope(in.Snap, model.DistrictStatistics{DistrictID: id}, fence), dh)
	if err != nil {
		return ""
	}
	return h
}

// NewInput is what a write, repair or plan by the writer whose fence and
// lock key hash stamp gives, on lock backend backend, builds its documents
// from: every district's document size and hash, from its data's, the
// root's estimate and the rankings' size, all as validation found them (prep,
// model.PrepareWrite), and the payload's hash. The documents themselves
// are built chunk by chunk, so that a write never holds more
// than its chunks in flight.
func NewInput(id string, snap *model.Snapshot, prep model.Prepared, stamp Stamp, backend string, start time.Time) (Input, error) {
	n := len(snap.Payload.Districts)
	in := Input{ID: id, Snap: snap, Fence: stamp.WriterFence, Backend: backend, KeyHash: stamp.WriterLockKeyHash, StartedAt: start,
		DocSizes: make(map[string]int, n), Hashes: make(map[string]string, n), DataHashes: make(map[string]string, n), OpBytes: make(map[string]int, n),
		RootEstimate: prep.Root.Inline, RankingsSize: prep.RankingsSize}
	sums, err := SummarizeDistricts(snap, prep.Districts, in.Fence)
	if err != nil {
		return in, fmt.Errorf("snapshot %s: %w", id, err)
	}
	for i, d := range snap.Payload.Districts {
		s := sums[i]
		in.DocSizes[d.DistrictID], in.OpBytes[d.DistrictID] = s.size, s.bytes
		in.Hashes[d.DistrictID], in.DataHashes[d.DistrictID] = s.hash, s.dataHash
	}
	if in.PayloadHash, err = PayloadHash(snap); err != nil {
		return in, fmt.Errorf("snapshot %s: %w", id, err)
	}
	return in, nil
}
