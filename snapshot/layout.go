package snapshot

import (
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/snapwriter/snapwriter/model"
)

// Status values of a manifest entry: the TypeScript readers know only
// these two. A district not written yet is "failed" with notWrittenYet.
const (
	entrySuccess = "success"
	entryFailed  = "failed"
)

// notWrittenYet is the errorMessage of a manifest entry whose district has
// not been written by the write in progress.
const notWrittenYet = "not written yet"

// metadata.status of a snapshot whose write has not succeeded (in
// progress, interrupted or finished with failed districts), and of a
// complete one: the application's vocabulary.
const (
	statusPartial = "partial"
	statusSuccess = "success"
)

// metadata.writeState, ours: whether a writer is at work ("writing": in
// progress, or interrupted when no live lock holds the key) or has
// recorded its outcome. legacyStatusWriting is the metadata.status earlier
// snapwriter versions left on such a root (with "pending" entries).
const (
	stateWriting        = "writing"
	stateFinished       = "finished"
	legacyStatusWriting = "writing"
)

// inProgress is whether a root whose writeState is writeState ("" when it
// has none, as roots of earlier versions) and status is status describes a
// write in progress or interrupted, in the current form or an earlier
// version's (rootMetadata.writing).
func inProgress(writeState, status string) bool {
	if writeState != "" {
		return writeState == stateWriting
	}
	return status == legacyStatusWriting
}

// fenceDocPath is where, below the root, the fence document lives: the
// copy of the writer's fence that chunk transactions and progress records
// read (a small document: reading the root in every chunk would hold the
// root's lock and fetch up to 1 MiB). Every transaction that moves the root
// to another fence writes this document too, so a chunk commit in flight
// conflicts with it, and so does a finish that must settle a chunk of
// unknown outcome.
const (
	fenceCollection = "snapwriter"
	fenceDocID      = "fence"
)

// districtDocID is the id of a district's document in the districts
// subcollection, as the TypeScript application names it.
func districtDocID(districtID string) string { return districtDocPrefix + districtID }

// districtEnvelope is the district document without its data: the
// application's envelope around the district's statistics, stamped with
// the fence of the writer that wrote it (a field the application's
// readers ignore), so that a commit whose outcome was lost can be checked.
type districtEnvelope struct {
	DistrictID   string `firestore:"districtId"`
	DistrictName string `firestore:"districtName"`
	CollectedAt  string `firestore:"collectedAt"`
	Status       string `firestore:"status"` // always entrySuccess
	WriterFence  string `firestore:"writerFence"`
}

// districtDocument is a stored district document: its envelope and the
// district's statistics, stored verbatim under data.
type districtDocument struct {
	districtEnvelope
	Data model.Object `firestore:"data"`
}

// districtDoc is the district document of d, written under fence: its
// envelope and, under data, d's data (DistrictStatistics.Data). It is
// hashed (districtHashes) and sent (wireSetWrite) as this map.
func districtDoc(s *model.Snapshot, d model.DistrictStatistics, data model.Object, fence string) map[string]any {
	doc := envelope(s, d, fence)
	doc[fieldData] = data
	return doc
}

// envelope is district d's document without its data.
func envelope(s *model.Snapshot, d model.DistrictStatistics, fence string) map[string]any {
	collected := s.Payload.Metadata.FetchedAt
	if collected == "" {
		collected = s.CreatedAt
	}
	return encodeFields(districtEnvelope{
		DistrictID:   d.DistrictID,
		DistrictName: "District " + d.DistrictID,
		CollectedAt:  collected,
		Status:       entrySuccess,
		WriterFence:  fence,
	})
}

// districtSummary is what a write needs of a district document before
// it is built (its data is read when its chunk is): its hash, the hash of
// its data, its size in the manifest and its size in a commit request.
type districtSummary struct {
	hash, dataHash string
	size, bytes    int
}

// summarizeDistrict is d's districtSummary, from its data's summary sum
// (model.Prepare): the document's hash, size and commit size are those of
// its envelope and its data's, exactly as they would be of the whole
// document built (districtHashes, FirestoreSize, encodedSize).
func (h *docHasher) summarizeDistrict(s *model.Snapshot, d model.DistrictStatistics, sum model.DataSummary, fence string) (districtSummary, error) {
	var err error
	env := envelope(s, d, fence)
	const dataKey = len(fieldData)
	ds := districtSummary{
		dataHash: digestHash(sum.Digest),
		size:     model.FirestoreSize(env) + dataKey + 1 + sum.FirestoreSize,
		bytes:    encodedSize(env) + dataKey + 12 + sum.EncodedSize,
	}
	ds.hash, err = h.envelopeHash(env, ds.dataHash)
	return ds, err
}

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
	// their sizes and hashes are held, for the root's manifest.
	docSizes map[string]int    // district id → document size, for the manifest
	hashes   map[string]string // district id → the hash of its document
	// dataHashes: district id → the hash of its data alone.
	dataHashes map[string]string
	opBytes    map[string]int // district id → its document's size in a commit request
	// payloadHash is the hash of the snapshot's own payload (payloadHash).
	payloadHash string
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

// rootDocument is the snapshot's root document: the application's
// PerDistrictSnapshot (metadata, manifest, rankings) plus what the input
// had that the layout has no place for. It is written as it is, and a
// stored root is read back into it (readRoot): Metadata is nil only for a
// stored document that has none.
type rootDocument struct {
	Metadata   *rootMetadata     `firestore:"metadata"`
	Manifest   manifest          `firestore:"manifest"`
	Rankings   *model.Object     `firestore:"rankings,omitempty"`
	InputExtra *inputExtraFields `firestore:"inputExtra,omitempty"`
}

// inputExtraFields keeps the input's keys the model does not name
// (model.Snapshot.Extra, model.Payload.Extra), verbatim.
type inputExtraFields struct {
	Snapshot model.Object `firestore:"snapshot,omitempty"`
	Payload  model.Object `firestore:"payload,omitempty"`
}

// rootMetadata is the application's PerDistrictSnapshotMetadata plus the
// writer's own fields. Its district lists say what is stored: successful
// the districts whose documents this snapshot holds, failed those it does
// not (and the input's own collection failures). PayloadMetadata keeps the
// input's metadata verbatim, its own lists included, so `get` returns
// exactly what was written, and InputSnapshotID the input's snapshot_id:
// SnapshotID is the date, as the application writes it. Lists are never
// nil: an absent array and an empty one differ to the application.
//
// Read back, the fields roots of the application or of earlier snapwriter
// versions may lack are pointers (nil when absent) where absence means
// something else than the zero value; of the others, absent reads as zero
// ("" for writeState: no writeState, an earlier version's root).
type rootMetadata struct {
	SnapshotID          string   `firestore:"snapshotId"`
	InputSnapshotID     *string  `firestore:"inputSnapshotId"` // nil: a root from before snapshotId was the date
	CreatedAt           string   `firestore:"createdAt"`
	SchemaVersion       string   `firestore:"schemaVersion"`
	CalculationVersion  string   `firestore:"calculationVersion"`
	Status              string   `firestore:"status"`
	ConfiguredDistricts []string `firestore:"configuredDistricts"`
	SuccessfulDistricts []string `firestore:"successfulDistricts"`
	FailedDistricts     []string `firestore:"failedDistricts"`
	Errors              []string `firestore:"errors"`
	ProcessingDuration  int64    `firestore:"processingDuration"`
	Source              string   `firestore:"source"`
	DataAsOfDate        string   `firestore:"dataAsOfDate"`
	// The input's optional fields, present when the input has them.
	DistrictErrors      *[]any  `firestore:"districtErrors,omitempty"`
	IsClosingPeriodData *bool   `firestore:"isClosingPeriodData,omitempty"`
	CollectionDate      string  `firestore:"collectionDate,omitempty"`
	LogicalDate         string  `firestore:"logicalDate,omitempty"`
	RankingVersion      *string `firestore:"rankingVersion,omitempty"`

	// The writer's own: what it is doing, under which fence, and what it
	// was given.
	WriteState           string   `firestore:"writeState"`           // stateWriting or stateFinished
	WriteComplete        *bool    `firestore:"writeComplete"`        // nil: a root of the application's that lacks it
	WriteFailedDistricts []string `firestore:"writeFailedDistricts"` // payload districts not stored
	writerStamp
	WriteStartedAt  string       `firestore:"writeStartedAt"`
	WriteFinishedAt string       `firestore:"writeFinishedAt,omitempty"`
	RepairStartedAt string       `firestore:"repairStartedAt,omitempty"`
	RepairedAt      string       `firestore:"repairedAt,omitempty"`
	PayloadHash     string       `firestore:"payloadHash"`
	PayloadMetadata model.Object `firestore:"payloadMetadata"` // nil: a root of the application's
}

// writerStamp names the writer of a root, and of its fence document: its
// fence, and the lock backend and key the fence was issued on.
type writerStamp struct {
	WriterFence       string `firestore:"writerFence"`
	WriterLockBackend string `firestore:"writerLockBackend"`
	WriterLockKeyHash string `firestore:"writerLockKeyHash"`
}

// manifest is the application's SnapshotManifest: one entry per district
// in input order. In the paged form (see pageDocument) Districts is left
// out of the root and the last three fields say where the entries are.
// The counts are pointers so that a stored manifest that lacks one is told
// from one that counts 0 (Verify reports either); a written one has all
// three.
type manifest struct {
	SnapshotID           string          `firestore:"snapshotId"`
	CreatedAt            string          `firestore:"createdAt"`
	Districts            []manifestEntry `firestore:"districts,omitempty"`
	TotalDistricts       *int64          `firestore:"totalDistricts"`
	SuccessfulDistricts  *int64          `firestore:"successfulDistricts"`
	FailedDistricts      *int64          `firestore:"failedDistricts"`
	AllDistrictsRankings rankingsEntry   `firestore:"allDistrictsRankings"`
	EntriesIn            string          `firestore:"entriesIn,omitempty"` // entriesInPages
	Pages                int64           `firestore:"pages,omitempty"`
	PageSize             int64           `firestore:"pageSize,omitempty"`
}

// manifestEntry is one district's entry in the manifest. Chunks remove
// and add entries by value, so an entry must be built the same way every
// time (pendingEntry). Entries of the application's roots have no
// contentHash ("" when read).
type manifestEntry struct {
	DistrictID   string `firestore:"districtId"`
	FileName     string `firestore:"fileName"`
	Status       string `firestore:"status"` // entrySuccess or entryFailed
	FileSize     int64  `firestore:"fileSize"`
	ContentHash  string `firestore:"contentHash"`
	LastModified string `firestore:"lastModified"`
	ErrorMessage string `firestore:"errorMessage,omitempty"` // failed entries only
}

// rankingsEntry is the manifest's entry for the snapshot's rankings.
type rankingsEntry struct {
	Filename string `firestore:"filename"`
	Size     int64  `firestore:"size"`
	Status   string `firestore:"status"` // rankingsPresent or rankingsMissing
}

// The rankings entry's filename and statuses.
const (
	rankingsFilename = "rankings"
	rankingsPresent  = "present"
	rankingsMissing  = "missing"
)

// fenceDocument is the fence document: the writer's fence, for the chunks'
// check (see fenceCollection).
type fenceDocument struct {
	writerStamp
	UpdatedAt string `firestore:"updatedAt"`
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
		m.AllDistrictsRankings.Size = int64(model.FirestoreSize(s.Rankings))
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

// isoMillis formats a manifest entry's lastModified as the application
// does (JavaScript's toISOString: UTC, milliseconds), 6 bytes shorter per
// district than nanoseconds in a root limited to 1 MiB.
func isoMillis(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

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
