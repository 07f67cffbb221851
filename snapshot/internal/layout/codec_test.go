package layout

import (
	"math"
	"reflect"
	"slices"
	"testing"
)

// layoutTypes are the stored documents' types.
var layoutTypes = []any{Root{}, Page{}, Fence{}, District{}}

// fieldConstants are the constants of fields.go.
var fieldConstants = []string{
	FieldMetadata, FieldManifest, fieldRankings, fieldInputExtra,
	fieldExtraSnapshot, fieldExtraPayload,
	FieldSnapshotID, fieldCreatedAt, fieldSchemaVersion, fieldCalculationVersion, FieldStatus,
	FieldConfiguredDistricts, FieldSuccessfulDistricts, FieldFailedDistricts, fieldErrors, fieldProcessingDuration,
	fieldSource, fieldDataAsOfDate, fieldDistrictErrors, fieldIsClosingPeriodData, fieldCollectionDate,
	fieldLogicalDate, fieldRankingVersion,
	fieldInputSnapshotID, FieldWriteState, FieldWriteComplete, FieldWriteFailedDistricts, FieldWriterFence,
	FieldWriterLockBackend, FieldWriterLockKeyHash, fieldWriteStartedAt, FieldWriteFinishedAt, fieldRepairStartedAt,
	fieldRepairedAt, fieldPayloadHash, fieldPayloadMetadata,
	FieldDistricts, FieldTotalDistricts, fieldAllDistrictsRankings, fieldEntriesIn, fieldPages, fieldPageSize,
	FieldDistrictID, fieldFileName, fieldFileSize, fieldContentHash, fieldLastModified, FieldErrorMessage,
	fieldFilename, fieldSize,
	fieldUpdatedAt,
	fieldPage, fieldFirst,
	fieldPageEntryID, fieldPageEntryStatus, fieldPageEntrySize, fieldPageEntryHash, fieldPageEntryModified,
	fieldPageEntryErrorMessage,
	FieldDistrictName, FieldCollectedAt, FieldData,
}

// tagNames adds the stored field names of struct type t, and of the
// structs it holds, to names.
func tagNames(t reflect.Type, names map[string]bool) {
	for _, f := range layoutFields(t) {
		names[f.name] = true
		ft := t.FieldByIndex(f.index).Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			tagNames(ft, names)
		}
	}
}

// Every firestore tag of the layout types is one of fields.go's constants,
// and every constant a tag: a field renamed on one side only fails here.
// (layoutFields also checks that the codec handles every field's type.)
func TestLayoutTagsAreFieldConstants(t *testing.T) {
	tags := map[string]bool{}
	for _, v := range layoutTypes {
		tagNames(reflect.TypeOf(v), tags)
	}
	consts := map[string]bool{}
	for _, c := range fieldConstants {
		if consts[c] {
			t.Errorf("two constants spell %q", c)
		}
		consts[c] = true
	}
	for name := range tags {
		if !consts[name] {
			t.Errorf("tag %q has no constant in fields.go", name)
		}
	}
	for name := range consts {
		if !tags[name] {
			t.Errorf("constant %q is no layout type's tag", name)
		}
	}
}

// Stored values of another type than the layout's read as absent, integers
// stay integers (a double is never an int64 field's), pointers tell absent
// from zero, and the user's payload is taken as stored.
func TestDecodeFieldsLenient(t *testing.T) {
	payload := map[string]any{"n": int64(math.MaxInt64), "x": 39.0, "list": []any{int64(1), 2.5, nil}}
	var r Root
	DecodeFields(map[string]any{
		FieldMetadata: map[string]any{
			FieldSnapshotID:           int64(7),                  // not a string: ""
			FieldStatus:               StatusSuccess,             //
			fieldProcessingDuration:   12.0,                      // a double: not an int64's
			FieldWriteComplete:        "yes",                     // not a bool: absent
			fieldInputSnapshotID:      nil,                       // null: absent
			FieldConfiguredDistricts:  []any{},                   // present, empty
			FieldFailedDistricts:      []any{"1", int64(2), "3"}, // an element of another type: ""
			fieldDistrictErrors:       []any{map[string]any{}},   //
			fieldPayloadMetadata:      payload,                   // verbatim
			FieldWriteFailedDistricts: "not a list",              //
		},
		FieldManifest: map[string]any{
			FieldTotalDistricts:      int64(0),
			FieldSuccessfulDistricts: 3.0,
			FieldDistricts:           []any{map[string]any{FieldDistrictID: "9", fieldFileSize: int64(1) << 60}, "junk"},
		},
		fieldRankings: "not an object",
	}, &r)
	md := r.Metadata
	if md == nil {
		t.Fatal("no metadata")
	}
	if md.SnapshotID != "" || md.Status != StatusSuccess || md.ProcessingDuration != 0 || md.WriteComplete != nil ||
		md.InputSnapshotID != nil || md.WriteFailedDistricts != nil {
		t.Errorf("scalars: %+v", md)
	}
	if md.ConfiguredDistricts == nil || len(md.ConfiguredDistricts) != 0 || md.SuccessfulDistricts != nil {
		t.Errorf("lists: configured %#v, successful %#v", md.ConfiguredDistricts, md.SuccessfulDistricts)
	}
	if !slices.Equal(md.FailedDistricts, []string{"1", "", "3"}) || md.DistrictErrors == nil || len(*md.DistrictErrors) != 1 {
		t.Errorf("failed %#v, districtErrors %v", md.FailedDistricts, md.DistrictErrors)
	}
	if !reflect.DeepEqual(map[string]any(md.PayloadMetadata), payload) || reflect.ValueOf(md.PayloadMetadata).Pointer() != reflect.ValueOf(payload).Pointer() {
		t.Errorf("payload metadata %#v, want the stored map itself", md.PayloadMetadata)
	}
	mf := r.Manifest
	if mf.TotalDistricts == nil || *mf.TotalDistricts != 0 || mf.SuccessfulDistricts != nil || mf.FailedDistricts != nil {
		t.Errorf("counts %v %v %v", mf.TotalDistricts, mf.SuccessfulDistricts, mf.FailedDistricts)
	}
	if len(mf.Districts) != 2 || mf.Districts[0] != (manifestEntry{DistrictID: "9", FileSize: 1 << 60}) || mf.Districts[1] != (manifestEntry{}) {
		t.Errorf("entries %+v", mf.Districts)
	}
	if r.Rankings != nil || r.InputExtra != nil {
		t.Errorf("rankings %v, inputExtra %v", r.Rankings, r.InputExtra)
	}

	var none Root
	DecodeFields(nil, &none)
	if !reflect.DeepEqual(none, Root{}) || !none.Meta().WrittenWhole() || none.Meta().Writing() {
		t.Errorf("no fields: %+v", none)
	}
}
