// Package layout is the document schema of a snapshot in Firestore: the
// root document with its metadata and manifest, the manifest pages, the
// fence document and the district documents, their field names, how they
// are built from an input (Input), hashed, encoded for a commit (the wire
// form) and read back, and the names of the documents (Names). It holds
// pure functions from input to documents and back: it reads and writes
// nothing, and its tests need no server.
package layout

import (
	"time"

	"github.com/snapwriter/snapwriter/model"
)

// Status values of a manifest entry: the TypeScript readers know only
// these two. A district not written yet is "failed" with NotWrittenYet.
// legacyEntryPending is the status roots of earlier snapwriter versions
// gave such a district.
const (
	EntrySuccess       = "success"
	EntryFailed        = "failed"
	legacyEntryPending = "pending"
)

// NotWrittenYet is the errorMessage of a manifest entry whose district the
// write in progress has not written. While the root says "writing" it
// means pending: the writer has not reached the district (or its chunk is
// in flight, or of unknown outcome until the finish), since the progress
// records record a chunk that failed for good as failed, with its error.
// A root whose writer died keeps it for the districts it never reached
// (and those it wrote in its last moments without recording them).
const NotWrittenYet = "not written yet"

// pending reports whether manifest entry e, of a root that says
// "writing", is of a district its writer has not reached: not written yet
// (or, in an earlier version's root, "pending").
func (e manifestEntry) Pending() bool {
	return e.Status == legacyEntryPending || e.Status != EntrySuccess && e.ErrorMessage == NotWrittenYet
}

// metadata.status of a snapshot whose write has not succeeded (in
// progress, interrupted or finished with failed districts), and of a
// complete one: the application's vocabulary.
const (
	StatusPartial = "partial"
	StatusSuccess = "success"
	// StatusFailed is what a prune marks a root with before it deletes
	// anything (see snapshot's Writer.Prune): the application's readers skip it.
	StatusFailed = "failed"
)

// metadata.writeState, ours: whether a writer is at work ("writing": in
// progress, or interrupted when no live lock holds the key) or has
// recorded its outcome, or a prune is deleting the snapshot ("deleting":
// in progress, or interrupted: a rerun of the prune finishes it).
// legacyStatusWriting is the metadata.status earlier
// snapwriter versions left on such a root (with "pending" entries).
const (
	StateWriting        = "writing"
	StateFinished       = "finished"
	StateDeleting       = "deleting"
	legacyStatusWriting = "writing"
)

// InProgress is whether a root whose writeState is writeState ("" when it
// has none, as roots of earlier versions) and status is status describes a
// write in progress or interrupted, in the current form or an earlier
// version's (Metadata.Writing).
func InProgress(writeState, status string) bool {
	if writeState != "" {
		return writeState == StateWriting
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
	FenceCollection = "snapwriter"
	FenceDocID      = "fence"
)

// DistrictDocID is the id of a district's document in the districts
// subcollection, as the TypeScript application names it.
func DistrictDocID(districtID string) string { return DistrictDocPrefix + districtID }

// Envelope is the district document without its data: the
// application's envelope around the district's statistics, stamped with
// the fence of the writer that wrote it (a field the application's
// readers ignore), so that a commit whose outcome was lost can be checked.
type Envelope struct {
	DistrictID   string `firestore:"districtId"`
	DistrictName string `firestore:"districtName"`
	CollectedAt  string `firestore:"collectedAt"`
	Status       string `firestore:"status"` // always EntrySuccess
	WriterFence  string `firestore:"writerFence"`
}

// District is a stored district document: its envelope and the
// district's statistics, stored verbatim under data.
type District struct {
	Envelope
	Data model.Object `firestore:"data"`
}

// DistrictDoc is the district document of d, written under fence: its
// envelope and, under data, d's data (DistrictStatistics.Data). It is
// hashed (DistrictHashes) and sent (WireSetWrite) as this map.
func DistrictDoc(s *model.Snapshot, d model.DistrictStatistics, data model.Object, fence string) map[string]any {
	doc := envelope(s, d, fence)
	doc[FieldData] = data
	return doc
}

// envelope is district d's document without its data.
func envelope(s *model.Snapshot, d model.DistrictStatistics, fence string) map[string]any {
	collected := s.Payload.Metadata.FetchedAt
	if collected == "" {
		collected = s.CreatedAt
	}
	return EncodeFields(Envelope{
		DistrictID:   d.DistrictID,
		DistrictName: "District " + d.DistrictID,
		CollectedAt:  collected,
		Status:       EntrySuccess,
		WriterFence:  fence,
	})
}

// Root is the snapshot's root document: the application's
// PerDistrictSnapshot (metadata, manifest, rankings) plus what the input
// had that the layout has no place for. It is written as it is, and a
// stored root is read back into it (ReadRoot): Metadata is nil only for a
// stored document that has none.
type Root struct {
	Metadata   *Metadata     `firestore:"metadata"`
	Manifest   Manifest      `firestore:"manifest"`
	Rankings   *model.Object `firestore:"rankings,omitempty"`
	InputExtra *ExtraFields  `firestore:"inputExtra,omitempty"`
}

// ExtraFields keeps the input's keys the model does not name
// (model.Snapshot.Extra, model.Payload.Extra), verbatim.
type ExtraFields struct {
	Snapshot model.Object `firestore:"snapshot,omitempty"`
	Payload  model.Object `firestore:"payload,omitempty"`
}

// Metadata is the application's PerDistrictSnapshotMetadata plus the
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
type Metadata struct {
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
	WriteState           string   `firestore:"writeState"`           // StateWriting, StateFinished or StateDeleting
	WriteComplete        *bool    `firestore:"writeComplete"`        // nil: a root of the application's that lacks it
	WriteFailedDistricts []string `firestore:"writeFailedDistricts"` // payload districts not stored
	Stamp
	WriteStartedAt  string       `firestore:"writeStartedAt"`
	WriteFinishedAt string       `firestore:"writeFinishedAt,omitempty"`
	RepairStartedAt string       `firestore:"repairStartedAt,omitempty"`
	RepairedAt      string       `firestore:"repairedAt,omitempty"`
	PayloadHash     string       `firestore:"payloadHash"`
	PayloadMetadata model.Object `firestore:"payloadMetadata"` // nil: a root of the application's
}

// Stamp names the writer of a root, and of its fence document: its
// fence, and the lock backend and key the fence was issued on.
type Stamp struct {
	WriterFence       string `firestore:"writerFence"`
	WriterLockBackend string `firestore:"writerLockBackend"`
	WriterLockKeyHash string `firestore:"writerLockKeyHash"`
}

// Manifest is the application's SnapshotManifest: one entry per district
// in input order. In the paged form (see Page) Districts is left
// out of the root and the last three fields say where the entries are.
// The counts are pointers so that a stored manifest that lacks one is told
// from one that counts 0 (Verify reports either); a written one has all
// three.
type Manifest struct {
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

// Entry is one district's entry in the manifest. Chunks remove
// and add entries by value, so an entry must be built the same way every
// time (pendingEntry). Entries of the application's roots have no
// ContentHash ("" when read).
type manifestEntry struct {
	DistrictID   string `firestore:"districtId"`
	FileName     string `firestore:"fileName"`
	Status       string `firestore:"status"` // EntrySuccess or EntryFailed
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

// Fence is the fence document: the writer's fence, for the chunks'
// check (see FenceCollection).
type Fence struct {
	Stamp
	UpdatedAt string `firestore:"updatedAt"`
}

// IsoMillis formats a manifest entry's lastModified as the application
// does (JavaScript's toISOString: UTC, milliseconds), 6 bytes shorter per
// district than nanoseconds in a root limited to 1 MiB.
func IsoMillis(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
