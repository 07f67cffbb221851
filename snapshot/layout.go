package snapshot

import (
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
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

// writing reports whether root metadata md describes a write in progress
// or interrupted, in the current form or an earlier version's.
func writing(md map[string]any) bool {
	ws, _ := md["writeState"].(string)
	st, _ := md["status"].(string)
	return inProgress(ws, st)
}

// inProgress is writing's rule on a root's writeState ("" when it has
// none, as roots of earlier versions) and status.
func inProgress(writeState, status string) bool {
	if writeState != "" {
		return writeState == stateWriting
	}
	return status == legacyStatusWriting
}

// currentForm reports whether root metadata md is in this version's form
// (it has a writeState), whose manifest and lists are exact at every
// moment, rather than an earlier version's or the application's.
func currentForm(md map[string]any) bool {
	ws, _ := md["writeState"].(string)
	return ws != ""
}

// writtenWhole reports whether root metadata md records a write that
// finished with every district written (writeComplete not false: roots of
// the application's writer may lack the flag).
func writtenWhole(md map[string]any) bool {
	done, flagged := md["writeComplete"].(bool)
	return (done || !flagged) && !writing(md)
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
func districtDocID(districtID string) string { return "district_" + districtID }

// districtDoc is the district document: the application's envelope around the
// district's statistics, which are stored verbatim under data, stamped with
// the fence of the writer that wrote it (a field the application's readers
// ignore), so that a commit whose outcome was lost can be checked. data is
// d's data (DistrictStatistics.LoadData).
func districtDoc(s *model.Snapshot, d model.DistrictStatistics, data model.Object, fence string) map[string]any {
	doc := envelope(s, d, fence)
	doc["data"] = data
	return doc
}

// envelope is district d's document without its data.
func envelope(s *model.Snapshot, d model.DistrictStatistics, fence string) map[string]any {
	collected := s.Payload.Metadata.FetchedAt
	if collected == "" {
		collected = s.CreatedAt
	}
	return map[string]any{
		"districtId":   d.DistrictID,
		"districtName": "District " + d.DistrictID,
		"collectedAt":  collected,
		"status":       entrySuccess,
		"writerFence":  fence,
	}
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
func summarizeDistrict(s *model.Snapshot, d model.DistrictStatistics, sum model.DataSummary, fence string) (districtSummary, error) {
	var err error
	env := envelope(s, d, fence)
	const dataKey = len("data")
	ds := districtSummary{
		dataHash: digestHash(sum.Digest),
		size:     model.FirestoreSize(env) + dataKey + 1 + sum.FirestoreSize,
		bytes:    encodedSize(env) + dataKey + 12 + sum.EncodedSize,
	}
	ds.hash, err = envelopeHash(env, ds.dataHash)
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
	// contended is set once a transaction of this write met another's
	// lock, so that it is explained in one WARNING, not one per retry.
	contended *atomic.Bool
	// superseded, when set and true, stops the finish's attempts: the
	// lost lock has passed to a newer writer (see watchSuperseded).
	superseded *atomic.Bool
	// rootCommits counts the commits of this write that wrote the root.
	rootCommits *atomic.Int32
	// lockWait is how long acquiring the lock took.
	lockWait time.Duration
	// shed admits the write's chunks, fewer at once while the store (and
	// so the lock's renewals) answers slowly; nil admits them all, up to
	// the concurrency.
	shed *shedder
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
// had that the layout has no place for.
type rootDocument struct {
	Metadata   rootMetadata   `firestore:"metadata"`
	Manifest   manifest       `firestore:"manifest"`
	Rankings   *model.Object  `firestore:"rankings,omitempty"`
	InputExtra map[string]any `firestore:"inputExtra,omitempty"`
}

// rootMetadata is the application's PerDistrictSnapshotMetadata plus the
// writer's own fields. Its district lists say what is stored: successful
// the districts whose documents this snapshot holds, failed those it does
// not (and the input's own collection failures). PayloadMetadata keeps the
// input's metadata verbatim, its own lists included, so `get` returns
// exactly what was written, and InputSnapshotID the input's snapshot_id:
// SnapshotID is the date, as the application writes it. Lists are never
// nil: an absent array and an empty one differ to the application.
type rootMetadata struct {
	SnapshotID          string   `firestore:"snapshotId"`
	InputSnapshotID     string   `firestore:"inputSnapshotId"`
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
	WriteState           string       `firestore:"writeState"` // stateWriting or stateFinished
	WriteComplete        bool         `firestore:"writeComplete"`
	WriteFailedDistricts []string     `firestore:"writeFailedDistricts"` // payload districts not stored
	WriterFence          string       `firestore:"writerFence"`
	WriterLockBackend    string       `firestore:"writerLockBackend"`
	WriterLockKeyHash    string       `firestore:"writerLockKeyHash"`
	WriteStartedAt       string       `firestore:"writeStartedAt"`
	WriteFinishedAt      string       `firestore:"writeFinishedAt,omitempty"`
	RepairStartedAt      string       `firestore:"repairStartedAt,omitempty"`
	RepairedAt           string       `firestore:"repairedAt,omitempty"`
	PayloadHash          string       `firestore:"payloadHash"`
	PayloadMetadata      model.Object `firestore:"payloadMetadata"`
}

// manifest is the application's SnapshotManifest: one entry per district
// in input order. In the paged form (see pageDocument) Districts is left
// out of the root and the last three fields say where the entries are.
type manifest struct {
	SnapshotID           string          `firestore:"snapshotId"`
	CreatedAt            string          `firestore:"createdAt"`
	Districts            []manifestEntry `firestore:"districts,omitempty"`
	TotalDistricts       int64           `firestore:"totalDistricts"`
	SuccessfulDistricts  int64           `firestore:"successfulDistricts"`
	FailedDistricts      int64           `firestore:"failedDistricts"`
	AllDistrictsRankings rankingsEntry   `firestore:"allDistrictsRankings"`
	EntriesIn            string          `firestore:"entriesIn,omitempty"` // entriesInPages
	Pages                int64           `firestore:"pages,omitempty"`
	PageSize             int64           `firestore:"pageSize,omitempty"`
}

// manifestEntry is one district's entry in the manifest. Chunks remove
// and add entries by value, so an entry must be built the same way every
// time (pendingEntry).
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
	Status   string `firestore:"status"` // "present" or "missing"
}

// fenceDocument is the fence document: the writer's fence, for the chunks'
// check (see fenceCollection).
type fenceDocument struct {
	WriterFence       string `firestore:"writerFence"`
	WriterLockBackend string `firestore:"writerLockBackend"`
	WriterLockKeyHash string `firestore:"writerLockKeyHash"`
	UpdatedAt         string `firestore:"updatedAt"`
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
	md := rootMetadata{
		SnapshotID:           in.id,
		InputSnapshotID:      s.SnapshotID,
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
		WriteComplete:        st.complete,
		WriteFailedDistricts: notStored,
		WriterFence:          in.fence,
		WriterLockBackend:    in.backend,
		WriterLockKeyHash:    in.keyHash,
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
		TotalDistricts:       int64(len(s.Payload.Districts)),
		AllDistrictsRankings: rankingsEntry{Filename: "rankings", Status: "missing"}}
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
			m.SuccessfulDistricts++
		} else {
			m.FailedDistricts++
		}
		m.Districts = append(m.Districts, e)
	}
	if s.Rankings != nil {
		m.AllDistrictsRankings.Size = int64(model.FirestoreSize(s.Rankings))
		m.AllDistrictsRankings.Status = "present"
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
	doc := rootDocument{Metadata: md, Manifest: mf, InputExtra: inputExtra(in.snap)}
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
	return fenceDocument{WriterFence: in.fence, WriterLockBackend: in.backend, WriterLockKeyHash: in.keyHash,
		UpdatedAt: at.UTC().Format(time.RFC3339Nano)}
}

// inputExtra keeps fields of the input that the layout has no place for.
func inputExtra(s *model.Snapshot) map[string]any {
	extra := map[string]any{}
	if len(s.Extra) > 0 {
		extra["snapshot"] = s.Extra
	}
	if len(s.Payload.Extra) > 0 {
		extra["payload"] = s.Payload.Extra
	}
	if len(extra) == 0 {
		return nil
	}
	return extra
}

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

// fromRoot rebuilds the input-format Snapshot from a root document and its
// district documents. Roots written by the TypeScript application have no
// payloadMetadata; their payload metadata is rebuilt the way its reader does.
func fromRoot(root map[string]any, districts map[string]map[string]any) (*model.Snapshot, error) {
	list := make([]any, 0, len(districts))
	for _, id := range manifestOrder(root, districts) {
		list = append(list, districts[id]["data"])
	}
	return fromRootList(root, len(districts), list)
}

// fromRootList is fromRoot of a root whose districts' data, in order, are
// list, and which n district documents are read with (the count a root of
// the application's rebuilds its payload metadata with).
func fromRootList(root map[string]any, n int, list []any) (*model.Snapshot, error) {
	md, _ := root["metadata"].(map[string]any)
	if md == nil {
		return nil, fmt.Errorf("root document has no metadata")
	}
	inputID, ok := md["inputSnapshotId"]
	if !ok {
		// Roots of the application, and of snapwriter before the
		// snapshotId was the date, hold the input's id there.
		inputID = md["snapshotId"]
	}
	s := map[string]any{
		"snapshot_id":         inputID,
		"created_at":          md["createdAt"],
		"schema_version":      md["schemaVersion"],
		"calculation_version": md["calculationVersion"],
		"status":              md["status"],
		"errors":              orEmpty(md["errors"]),
	}
	pm, _ := md["payloadMetadata"].(map[string]any)
	if pm == nil {
		pm = legacyPayloadMetadata(md, n)
	}
	payload := map[string]any{"metadata": pm}
	if extra, ok := root["inputExtra"].(map[string]any); ok {
		for k, v := range asMap(extra["snapshot"]) {
			s[k] = v
		}
		for k, v := range asMap(extra["payload"]) {
			payload[k] = v
		}
	}
	payload["districts"] = list
	s["payload"] = payload
	if r, ok := root["rankings"]; ok && r != nil {
		s["rankings"] = r
	}
	b, err := model.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encoding stored snapshot: %w", err)
	}
	return model.Decode(bytesReader(b))
}

// legacyPayloadMetadata mirrors the TypeScript reader for roots it wrote.
func legacyPayloadMetadata(md map[string]any, n int) map[string]any {
	pm := map[string]any{
		"source":               md["source"],
		"fetchedAt":            md["createdAt"],
		"dataAsOfDate":         md["dataAsOfDate"],
		"districtCount":        int64(n),
		"processingDurationMs": md["processingDuration"],
	}
	for _, k := range []string{"configuredDistricts", "successfulDistricts", "failedDistricts", "districtErrors", "isClosingPeriodData", "collectionDate", "logicalDate"} {
		if v, ok := md[k]; ok {
			pm[k] = v
		}
	}
	return pm
}

// manifestOrder lists the stored district ids in manifest order, then any
// district document the manifest does not name, sorted.
func manifestOrder[V any](root map[string]any, districts map[string]V) []string {
	seen := map[string]bool{}
	var ids []string
	mf := asMap(root["manifest"])
	entries, _ := mf["districts"].([]any)
	for _, e := range entries {
		id, _ := asMap(e)["districtId"].(string)
		if _, ok := districts[id]; ok && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
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

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func orEmpty(v any) any {
	if v == nil {
		return []any{}
	}
	return v
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
	h, err := envelopeHash(envelope(in.snap, model.DistrictStatistics{DistrictID: id}, fence), dh)
	if err != nil {
		return ""
	}
	return h
}
