package snapshot

// rootInput: what a write builds its root document, manifest and fence
// document from. The stored layouts themselves are in layout.go.

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

// rootInput holds what the root document is built from, so the start and
// finish transactions write the same metadata.
type rootInput struct {
	id        string
	snap      *model.Snapshot
	fence     string
	backend   string
	keyHash   string // the lock key's hash, which fences are comparable under
	startedAt time.Time
	// The district documents are built when their chunk is written; only
	// their sizes and hashes are held (summarizeDistricts), for the root's
	// manifest.
	docSizes map[string]int    // district id → document size, for the manifest
	hashes   map[string]string // district id → the hash of its document
	// dataHashes: district id → the hash of its data alone.
	dataHashes map[string]string
	opBytes    map[string]int // district id → its document's size in a commit request
	// payloadHash is the hash of the snapshot's own payload (payloadHash).
	payloadHash string
	// rootEstimate is the root's estimated size with its manifest inline,
	// which paginate decides the manifest's form by, and rankingsSize the
	// rankings' size, for the manifest: both from validation
	// (model.PrepareWrite), which sized the root and the rankings once.
	rootEstimate, rankingsSize int
	// repairing: the write is a repair (the root says when it started and
	// when it was recorded).
	repairing bool
	// kept: districts a repair leaves as they are stored, with what their
	// manifest entries say of the stored documents.
	kept map[string]keptDistrict
	// pageSize is the entries per manifest page of a paged manifest, 0
	// for the inline form (see paginate); pageOf: district id → its page.
	pageSize int
	pageOf   map[string]int
}

// districtSummary is what a write needs of a district document before
// it is built (its data is read when its chunk is): its hash, the hash of
// its data, its size in the manifest and its size in a commit request.
type districtSummary struct {
	hash, dataHash string
	size, bytes    int
}

// summarizeDistricts is every district's districtSummary
// (summarizeDistrict), in input order, from data, its data's summaries
// (model.PrepareWrite): the data was checked, sized and hashed in one
// walk, when the input was read or validated, and is not walked again
// here; only each district's small envelope is, once.
func summarizeDistricts(s *model.Snapshot, data []model.DataSummary, fence string) ([]districtSummary, error) {
	ds := s.Payload.Districts
	if len(data) != len(ds) {
		return nil, fmt.Errorf("%d data %s for %s", len(data), plural.Word(len(data), "summary", "summaries"), plural.N(len(ds), "district"))
	}
	sums := make([]districtSummary, len(ds))
	var h docHasher
	for i, d := range ds {
		var err error
		if sums[i], err = h.summarizeDistrict(s, d, data[i], fence); err != nil {
			return nil, fmt.Errorf("district %s: %w", d.DistrictID, err)
		}
	}
	return sums, nil
}

// summarizeDistrict is d's districtSummary, from its data's summary sum
// and one walk of its envelope, the walk that hashes it (envelopeHash)
// and sizes it. The document's hash, size and commit size are exactly
// those of the whole document built (districtHashes, FirestoreSize,
// EncodedSize): both sizes of a map are sums over its members, so the
// document's are those of the envelope as hashed, with the data's hash
// replaced by the data and writerFence, which the hash leaves out, added.
func (h *docHasher) summarizeDistrict(s *model.Snapshot, d model.DistrictStatistics, sum model.DataSummary, fence string) (districtSummary, error) {
	dataHash := digestHash(sum.Digest)
	env := envelope(s, d, fence)
	hashed, err := h.summarize(env, dataHash)
	if err != nil {
		return districtSummary{}, err
	}
	const fenceKey = len(fieldWriterFence)
	fv := env[fieldWriterFence]
	return districtSummary{
		hash:     digestHash(hashed.Digest),
		dataHash: dataHash,
		size:     hashed.FirestoreSize - model.FirestoreSize(dataHash) + sum.FirestoreSize + fenceKey + 1 + model.FirestoreSize(fv),
		bytes:    hashed.EncodedSize - model.EncodedSize(dataHash) + sum.EncodedSize + fenceKey + 12 + model.EncodedSize(fv),
	}, nil
}

// keptDistrict is the manifest's record of a stored district document
// that a repair keeps: when it was written, its hash and its size.
type keptDistrict struct {
	modified string
	hash     string
	size     int64
}

// rootState is what the root says of the write at one moment.
type rootState struct {
	status     string            // metadata.status
	writing    bool              // metadata.writeState: writing, else finished
	complete   bool              // metadata.writeComplete
	entries    map[string]string // district → manifest entry status; unset: kept, else not written yet
	msgs       map[string]string // district → errorMessage of a failed entry
	modified   time.Time         // lastModified of the entries set in entries, unless times has theirs
	times      map[string]string // district → lastModified (isoMillis) of its entry: when its chunk committed
	finishedAt time.Time
}

// stored reports whether district id's document holds this snapshot's
// version, as the root in state st records it.
func (in rootInput) stored(st rootState, id string) bool {
	if e, ok := st.entries[id]; ok {
		return e == entrySuccess
	}
	_, kept := in.kept[id]
	return kept
}

// stamp is the writerStamp of in's writer.
func (in rootInput) stamp() writerStamp {
	return writerStamp{WriterFence: in.fence, WriterLockBackend: in.backend, WriterLockKeyHash: in.keyHash}
}

// metadata is the root's metadata for state st.
func (in rootInput) metadata(st rootState) (rootMetadata, error) {
	s := in.snap
	pm := s.Payload.Metadata
	ids := districtIDs(s)
	configured := pm.ConfiguredDistricts
	if configured == nil {
		configured = ids
	}
	successful := make([]string, 0, len(ids))
	notStored := make([]string, 0, len(ids))
	for _, id := range ids {
		if in.stored(st, id) {
			successful = append(successful, id)
		} else {
			notStored = append(notStored, id)
		}
	}
	failed := make([]string, 0, len(pm.FailedDistricts)+len(notStored))
	seen := make(map[string]bool, cap(failed))
	for _, id := range append(slices.Clone(pm.FailedDistricts), notStored...) {
		if !seen[id] && !in.stored(st, id) {
			seen[id] = true
			failed = append(failed, id)
		}
	}
	verbatim, err := toObject(pm)
	if err != nil {
		return rootMetadata{}, fmt.Errorf("encoding payload metadata: %w", err)
	}
	state := stateFinished
	if st.writing {
		state = stateWriting
	}
	inputID, complete := s.SnapshotID, st.complete
	md := rootMetadata{
		SnapshotID:           in.id,
		InputSnapshotID:      &inputID,
		CreatedAt:            s.CreatedAt,
		SchemaVersion:        s.SchemaVersion,
		CalculationVersion:   s.CalculationVersion,
		Status:               st.status,
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
		writerStamp:          in.stamp(),
		WriteStartedAt:       in.startedAt.UTC().Format(time.RFC3339Nano),
		PayloadHash:          in.payloadHash,
		PayloadMetadata:      verbatim,
	}
	if pm.DistrictErrors != nil {
		md.DistrictErrors = &pm.DistrictErrors
	}
	if !st.finishedAt.IsZero() {
		md.WriteFinishedAt = st.finishedAt.UTC().Format(time.RFC3339Nano)
	}
	if in.repairing {
		md.RepairStartedAt = in.startedAt.UTC().Format(time.RFC3339Nano)
		md.RepairedAt = md.WriteFinishedAt
	}
	if v, ok := rankingVersion(s.Rankings); ok {
		md.RankingVersion = &v
	}
	return md, nil
}

// entry is the manifest entry of district id.
func (in rootInput) entry(id, status, msg, modified string) manifestEntry {
	e := manifestEntry{DistrictID: id, FileName: districtDocID(id), Status: status,
		FileSize: int64(in.docSizes[id]), ContentHash: in.hashes[id], LastModified: modified}
	if status == entryFailed {
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
func (in rootInput) pendingEntry(id string) manifestEntry {
	return in.entry(id, entryFailed, notWrittenYet, isoMillis(in.startedAt))
}

// manifest is the manifest for state st.
func (in rootInput) manifest(st rootState) manifest {
	s := in.snap
	m := manifest{SnapshotID: in.id, CreatedAt: s.CreatedAt, Districts: make([]manifestEntry, 0, len(s.Payload.Districts)),
		AllDistrictsRankings: rankingsEntry{Filename: rankingsFilename, Status: rankingsMissing}}
	var successful, failed int64
	modified := isoMillis(st.modified)
	for _, d := range s.Payload.Districts {
		id := d.DistrictID
		var e manifestEntry
		if status, set := st.entries[id]; set {
			at, ok := st.times[id]
			if !ok {
				at = modified
			}
			e = in.entry(id, status, st.msgs[id], at)
		} else if k, kept := in.kept[id]; kept {
			e = in.entry(id, entrySuccess, "", k.modified)
			e.ContentHash, e.FileSize = k.hash, k.size
		} else {
			e = in.pendingEntry(id)
		}
		if e.Status == entrySuccess {
			successful++
		} else {
			failed++
		}
		m.Districts = append(m.Districts, e)
	}
	total := int64(len(s.Payload.Districts))
	m.TotalDistricts, m.SuccessfulDistricts, m.FailedDistricts = &total, &successful, &failed
	if s.Rankings != nil {
		m.AllDistrictsRankings.Size = int64(in.rankingsSize)
		m.AllDistrictsRankings.Status = rankingsPresent
	}
	return m
}

// rootDoc is the root document written before any district, and its
// manifest pages when paged: status "partial", writeState "writing", not
// complete, every district not written yet but those a repair keeps.
func (in rootInput) rootDoc() (rootDocument, []pageDocument, error) {
	st := rootState{status: statusPartial, writing: true}
	md, err := in.metadata(st)
	if err != nil {
		return rootDocument{}, nil, err
	}
	mf, pages := in.split(in.manifest(st))
	doc := rootDocument{Metadata: &md, Manifest: mf, InputExtra: inputExtra(in.snap)}
	if in.snap.Rankings != nil {
		doc.Rankings = &in.snap.Rankings
	}
	return doc, pages, nil
}

// fenceDoc is the fence document's content for this writer.
func (in rootInput) fenceDoc(at time.Time) fenceDocument {
	return fenceDocument{writerStamp: in.stamp(), UpdatedAt: at.UTC().Format(time.RFC3339Nano)}
}

// inputExtra keeps fields of the input that the layout has no place for
// (nil when there are none).
func inputExtra(s *model.Snapshot) *inputExtraFields {
	if len(s.Extra) == 0 && len(s.Payload.Extra) == 0 {
		return nil
	}
	return &inputExtraFields{Snapshot: s.Extra, Payload: s.Payload.Extra}
}

// rankingVersion is the version the input's rankings (the user's payload,
// AllDistrictsRankingsData) name in their metadata.
func rankingVersion(r model.Object) (string, bool) {
	md, _ := r["metadata"].(map[string]any)
	v, ok := md["rankingVersion"].(string)
	return v, ok
}

func districtIDs(s *model.Snapshot) []string {
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
// in rootread.go.
func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// hashUnder is the hash district id's document has when written from this
// input under fence: the hash in.hashes holds for this writer's fence, and
// for another's (a writer that died before recording it) the same
// envelope and data stamped with that fence. "" when it cannot be told.
func (in rootInput) hashUnder(id, fence string) string {
	if fence == in.fence {
		return in.hashes[id]
	}
	dh, ok := in.dataHashes[id]
	if !ok {
		return ""
	}
	h, err := new(docHasher).envelopeHash(envelope(in.snap, model.DistrictStatistics{DistrictID: id}, fence), dh)
	if err != nil {
		return ""
	}
	return h
}

// buildInput is what a write, repair or plan (Plan) by the writer whose
// fence and lock key hash stamp gives builds its documents from: every
// district's document size and hash, from its data's, the root's
// estimate and the rankings' size, all as validation found them (prep,
// model.PrepareWrite), and the payload's hash. The documents themselves
// are built chunk by chunk (document), so that a write never holds more
// than its chunks in flight.
func (w *Writer) buildInput(id string, snap *model.Snapshot, prep model.Prepared, stamp writerStamp, start time.Time) (rootInput, error) {
	n := len(snap.Payload.Districts)
	in := rootInput{id: id, snap: snap, fence: stamp.WriterFence, backend: w.lockName, keyHash: stamp.WriterLockKeyHash, startedAt: start,
		docSizes: make(map[string]int, n), hashes: make(map[string]string, n), dataHashes: make(map[string]string, n), opBytes: make(map[string]int, n),
		rootEstimate: prep.Root.Inline, rankingsSize: prep.RankingsSize}
	sums, err := summarizeDistricts(snap, prep.Districts, in.fence)
	if err != nil {
		return in, fmt.Errorf("snapshot %s: %w", id, err)
	}
	for i, d := range snap.Payload.Districts {
		s := sums[i]
		in.docSizes[d.DistrictID], in.opBytes[d.DistrictID] = s.size, s.bytes
		in.hashes[d.DistrictID], in.dataHashes[d.DistrictID] = s.hash, s.dataHash
	}
	if in.payloadHash, err = payloadHash(snap); err != nil {
		return in, fmt.Errorf("snapshot %s: %w", id, err)
	}
	return in, nil
}
