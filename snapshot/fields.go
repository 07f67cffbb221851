package snapshot

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
	// The root document (rootDocument).
	fieldMetadata   = "metadata"
	fieldManifest   = "manifest"
	fieldRankings   = "rankings"
	fieldInputExtra = "inputExtra"

	// inputExtra (inputExtraFields).
	fieldExtraSnapshot = "snapshot"
	fieldExtraPayload  = "payload"

	// The root's metadata (rootMetadata), the application's fields.
	fieldSnapshotID          = "snapshotId" // also the manifest's and a page's
	fieldCreatedAt           = "createdAt"  // also the manifest's
	fieldSchemaVersion       = "schemaVersion"
	fieldCalculationVersion  = "calculationVersion"
	fieldStatus              = "status" // also an entry's, a district document's, the rankings entry's
	fieldConfiguredDistricts = "configuredDistricts"
	fieldSuccessfulDistricts = "successfulDistricts" // a list in metadata, a count in the manifest
	fieldFailedDistricts     = "failedDistricts"     // a list in metadata, a count in the manifest
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
	fieldWriteState           = "writeState"
	fieldWriteComplete        = "writeComplete"
	fieldWriteFailedDistricts = "writeFailedDistricts"
	fieldWriterFence          = "writerFence" // also the fence document's and a district document's
	fieldWriterLockBackend    = "writerLockBackend"
	fieldWriterLockKeyHash    = "writerLockKeyHash"
	fieldWriteStartedAt       = "writeStartedAt"
	fieldWriteFinishedAt      = "writeFinishedAt"
	fieldRepairStartedAt      = "repairStartedAt"
	fieldRepairedAt           = "repairedAt"
	fieldPayloadHash          = "payloadHash"
	fieldPayloadMetadata      = "payloadMetadata"

	// The manifest (manifest).
	fieldDistricts            = "districts" // also a page's
	fieldTotalDistricts       = "totalDistricts"
	fieldAllDistrictsRankings = "allDistrictsRankings"
	fieldEntriesIn            = "entriesIn"
	fieldPages                = "pages"
	fieldPageSize             = "pageSize"

	// A manifest entry (manifestEntry).
	fieldDistrictID   = "districtId" // also a district document's
	fieldFileName     = "fileName"
	fieldFileSize     = "fileSize"
	fieldContentHash  = "contentHash"
	fieldLastModified = "lastModified"
	fieldErrorMessage = "errorMessage"

	// The manifest's rankings entry (rankingsEntry).
	fieldFilename = "filename"
	fieldSize     = "size"

	// The fence document (fenceDocument).
	fieldUpdatedAt = "updatedAt"

	// A manifest page (pageDocument).
	fieldPage  = "page"
	fieldFirst = "first"

	// A manifest page's entry (pageEntry): short keys.
	fieldPageEntryID           = "id"
	fieldPageEntryStatus       = "st"
	fieldPageEntrySize         = "sz"
	fieldPageEntryHash         = "h"
	fieldPageEntryModified     = "t"
	fieldPageEntryErrorMessage = "err"

	// A district document (districtEnvelope, districtDocument).
	fieldDistrictName = "districtName"
	fieldCollectedAt  = "collectedAt"
	fieldData         = "data"
)

// districtsCollection is the subcollection of a snapshot's district
// documents; districtDocPrefix begins their ids (districtDocID).
const (
	districtsCollection = "districts"
	districtDocPrefix   = "district_"
)

// fieldPath is the field path of a nested field, its names joined with
// dots: fieldPath(fieldMetadata, fieldStatus) is "metadata.status". The
// names here are plain identifiers, which need no quoting.
func fieldPath(names ...string) string { return strings.Join(names, ".") }
