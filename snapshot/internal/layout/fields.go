package layout

import "strings"

// The names of the stored documents' fields, one constant each. The
// layout types (layout.go, pages.go) carry them in their firestore tags,
// which Go cannot spell with constants: TestLayoutTagsAreFieldConstants
// holds every tag to one of these, and every one of these to a tag. Code
// that names a field outside a tag (a field path of a query, a
// projection or an update, a stored document hashed as it is, a test)
// uses the constant.
//
// A name used in several documents is one constant: "status" is the
// metadata's, a manifest entry's, a district document's and the rankings
// entry's.
const (
	// The root document (Root).
	FieldMetadata   = "metadata"
	FieldManifest   = "manifest"
	fieldRankings   = "rankings"
	fieldInputExtra = "inputExtra"

	// inputExtra (ExtraFields).
	fieldExtraSnapshot = "snapshot"
	fieldExtraPayload  = "payload"

	// The root's metadata (Metadata), the application's fields.
	FieldSnapshotID          = "snapshotId" // also the manifest's and a page's
	fieldCreatedAt           = "createdAt"  // also the manifest's
	fieldSchemaVersion       = "schemaVersion"
	fieldCalculationVersion  = "calculationVersion"
	FieldStatus              = "status" // also an entry's, a district document's, the rankings entry's
	FieldConfiguredDistricts = "configuredDistricts"
	FieldSuccessfulDistricts = "successfulDistricts" // a list in metadata, a count in the manifest
	FieldFailedDistricts     = "failedDistricts"     // a list in metadata, a count in the manifest
	fieldErrors              = "errors"
	fieldProcessingDuration  = "processingDuration"
	fieldSource              = "source"
	fieldDataAsOfDate        = "dataAsOfDate"
	fieldDistrictErrors      = "districtErrors"
	fieldIsClosingPeriodData = "isClosingPeriodData"
	fieldCollectionDate      = "collectionDate"
	fieldLogicalDate         = "logicalDate"
	fieldRankingVersion      = "rankingVersion"

	// The root's metadata, snapwriter's own fields.
	fieldInputSnapshotID      = "inputSnapshotId"
	FieldWriteState           = "writeState"
	FieldWriteComplete        = "writeComplete"
	FieldWriteFailedDistricts = "writeFailedDistricts"
	FieldWriterFence          = "writerFence" // also the fence document's and a district document's
	FieldWriterLockBackend    = "writerLockBackend"
	FieldWriterLockKeyHash    = "writerLockKeyHash"
	fieldWriteStartedAt       = "writeStartedAt"
	FieldWriteFinishedAt      = "writeFinishedAt"
	fieldRepairStartedAt      = "repairStartedAt"
	fieldRepairedAt           = "repairedAt"
	fieldPayloadHash          = "payloadHash"
	fieldPayloadMetadata      = "payloadMetadata"

	// The manifest (manifest).
	FieldDistricts            = "districts" // also a page's
	FieldTotalDistricts       = "totalDistricts"
	fieldAllDistrictsRankings = "allDistrictsRankings"
	fieldEntriesIn            = "entriesIn"
	fieldPages                = "pages"
	fieldPageSize             = "pageSize"

	// A manifest entry (Entry).
	FieldDistrictID   = "districtId" // also a district document's
	fieldFileName     = "fileName"
	fieldFileSize     = "fileSize"
	fieldContentHash  = "contentHash"
	fieldLastModified = "lastModified"
	FieldErrorMessage = "errorMessage"

	// The manifest's rankings entry (rankingsEntry).
	fieldFilename = "filename"
	fieldSize     = "size"

	// The fence document (Fence).
	fieldUpdatedAt = "updatedAt"

	// A manifest page (Page).
	fieldPage  = "page"
	fieldFirst = "first"

	// A manifest page's entry (pageEntry): short keys.
	fieldPageEntryID           = "id"
	fieldPageEntryStatus       = "st"
	fieldPageEntrySize         = "sz"
	fieldPageEntryHash         = "h"
	fieldPageEntryModified     = "t"
	fieldPageEntryErrorMessage = "err"

	// A district document (Envelope, District).
	FieldDistrictName = "districtName"
	FieldCollectedAt  = "collectedAt"
	FieldData         = "data"
)

// DistrictsCollection is the subcollection of a snapshot's district
// documents; DistrictDocPrefix begins their ids (DistrictDocID).
const (
	DistrictsCollection = "districts"
	DistrictDocPrefix   = "district_"
)

// FieldPath is the field path of a nested field, its names joined with
// dots: FieldPath(FieldMetadata, FieldStatus) is "metadata.status". The
// names here are plain identifiers, which need no quoting.
func FieldPath(names ...string) string { return strings.Join(names, ".") }
