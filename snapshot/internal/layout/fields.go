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
	FieldRankings   = "rankings"
	FieldInputExtra = "inputExtra"

	// inputExtra (inputExtraFields).
	FieldExtraSnapshot = "snapshot"
	FieldExtraPayload  = "payload"

	// The root's metadata (Metadata), the application's fields.
	FieldSnapshotID          = "snapshotId" // also the manifest's and a page's
	FieldCreatedAt           = "createdAt"  // also the manifest's
	FieldSchemaVersion       = "schemaVersion"
	FieldCalculationVersion  = "calculationVersion"
	FieldStatus              = "status" // also an entry's, a district document's, the rankings entry's
	FieldConfiguredDistricts = "configuredDistricts"
	FieldSuccessfulDistricts = "successfulDistricts" // a list in metadata, a count in the manifest
	FieldFailedDistricts     = "failedDistricts"     // a list in metadata, a count in the manifest
	FieldErrors              = "errors"
	FieldProcessingDuration  = "processingDuration"
	FieldSource              = "source"
	FieldDataAsOfDate        = "dataAsOfDate"
	FieldDistrictErrors      = "districtErrors"
	FieldIsClosingPeriodData = "isClosingPeriodData"
	FieldCollectionDate      = "collectionDate"
	FieldLogicalDate         = "logicalDate"
	FieldRankingVersion      = "rankingVersion"

	// The root's metadata, snapwriter's own fields.
	FieldInputSnapshotID      = "inputSnapshotId"
	FieldWriteState           = "writeState"
	FieldWriteComplete        = "writeComplete"
	FieldWriteFailedDistricts = "writeFailedDistricts"
	FieldWriterFence          = "writerFence" // also the fence document's and a district document's
	FieldWriterLockBackend    = "writerLockBackend"
	FieldWriterLockKeyHash    = "writerLockKeyHash"
	FieldWriteStartedAt       = "writeStartedAt"
	FieldWriteFinishedAt      = "writeFinishedAt"
	FieldRepairStartedAt      = "repairStartedAt"
	FieldRepairedAt           = "repairedAt"
	FieldPayloadHash          = "payloadHash"
	FieldPayloadMetadata      = "payloadMetadata"

	// The manifest (manifest).
	FieldDistricts            = "districts" // also a page's
	FieldTotalDistricts       = "totalDistricts"
	FieldAllDistrictsRankings = "allDistrictsRankings"
	FieldEntriesIn            = "entriesIn"
	FieldPages                = "pages"
	FieldPageSize             = "pageSize"

	// A manifest entry (Entry).
	FieldDistrictID   = "districtId" // also a district document's
	FieldFileName     = "fileName"
	FieldFileSize     = "fileSize"
	FieldContentHash  = "contentHash"
	FieldLastModified = "lastModified"
	FieldErrorMessage = "errorMessage"

	// The manifest's rankings entry (rankingsEntry).
	FieldFilename = "filename"
	FieldSize     = "size"

	// The fence document (Fence).
	FieldUpdatedAt = "updatedAt"

	// A manifest page (Page).
	FieldPage  = "page"
	FieldFirst = "first"

	// A manifest page's entry (pageEntry): short keys.
	FieldPageEntryID           = "id"
	FieldPageEntryStatus       = "st"
	FieldPageEntrySize         = "sz"
	FieldPageEntryHash         = "h"
	FieldPageEntryModified     = "t"
	FieldPageEntryErrorMessage = "err"

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
