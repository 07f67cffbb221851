package snapshot

import (
	"context"
	"math"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/snapshot/internal/layout"

	"cloud.google.com/go/firestore"
	"github.com/snapwriter/snapwriter/model"
)

// layoutTypes are the stored documents' types.
var layoutTypes = []any{layout.Root{}, layout.Page{}, layout.Fence{}, layout.District{}}

// fieldConstants are the constants of fields.go.
var fieldConstants = []string{
	layout.FieldMetadata, layout.FieldManifest, layout.FieldRankings, layout.FieldInputExtra,
	layout.FieldExtraSnapshot, layout.FieldExtraPayload,
	layout.FieldSnapshotID, layout.FieldCreatedAt, layout.FieldSchemaVersion, layout.FieldCalculationVersion, layout.FieldStatus,
	layout.FieldConfiguredDistricts, layout.FieldSuccessfulDistricts, layout.FieldFailedDistricts, layout.FieldErrors, layout.FieldProcessingDuration,
	layout.FieldSource, layout.FieldDataAsOfDate, layout.FieldDistrictErrors, layout.FieldIsClosingPeriodData, layout.FieldCollectionDate,
	layout.FieldLogicalDate, layout.FieldRankingVersion,
	layout.FieldInputSnapshotID, layout.FieldWriteState, layout.FieldWriteComplete, layout.FieldWriteFailedDistricts, layout.FieldWriterFence,
	layout.FieldWriterLockBackend, layout.FieldWriterLockKeyHash, layout.FieldWriteStartedAt, layout.FieldWriteFinishedAt, layout.FieldRepairStartedAt,
	layout.FieldRepairedAt, layout.FieldPayloadHash, layout.FieldPayloadMetadata,
	layout.FieldDistricts, layout.FieldTotalDistricts, layout.FieldAllDistrictsRankings, layout.FieldEntriesIn, layout.FieldPages, layout.FieldPageSize,
	layout.FieldDistrictID, layout.FieldFileName, layout.FieldFileSize, layout.FieldContentHash, layout.FieldLastModified, layout.FieldErrorMessage,
	layout.FieldFilename, layout.FieldSize,
	layout.FieldUpdatedAt,
	layout.FieldPage, layout.FieldFirst,
	layout.FieldPageEntryID, layout.FieldPageEntryStatus, layout.FieldPageEntrySize, layout.FieldPageEntryHash, layout.FieldPageEntryModified,
	layout.FieldPageEntryErrorMessage,
	layout.FieldDistrictName, layout.FieldCollectedAt, layout.FieldData,
}

// tagNames adds the stored field names of struct type t, and of the
// structs it holds, to names.
func tagNames(t reflect.Type, names map[string]bool) {
	for _, f := range layout.LayoutFields(t) {
		names[f.Name] = true
		ft := t.FieldByIndex(f.Index).Type
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
// (layout.LayoutFields also checks that the codec handles every field's type.)
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
	var r layout.Root
	layout.DecodeFields(map[string]any{
		layout.FieldMetadata: map[string]any{
			layout.FieldSnapshotID:           int64(7),                  // not a string: ""
			layout.FieldStatus:               layout.StatusSuccess,      //
			layout.FieldProcessingDuration:   12.0,                      // a double: not an int64's
			layout.FieldWriteComplete:        "yes",                     // not a bool: absent
			layout.FieldInputSnapshotID:      nil,                       // null: absent
			layout.FieldConfiguredDistricts:  []any{},                   // present, empty
			layout.FieldFailedDistricts:      []any{"1", int64(2), "3"}, // an element of another type: ""
			layout.FieldDistrictErrors:       []any{map[string]any{}},   //
			layout.FieldPayloadMetadata:      payload,                   // verbatim
			layout.FieldWriteFailedDistricts: "not a list",              //
		},
		layout.FieldManifest: map[string]any{
			layout.FieldTotalDistricts:      int64(0),
			layout.FieldSuccessfulDistricts: 3.0,
			layout.FieldDistricts:           []any{map[string]any{layout.FieldDistrictID: "9", layout.FieldFileSize: int64(1) << 60}, "junk"},
		},
		layout.FieldRankings: "not an object",
	}, &r)
	md := r.Metadata
	if md == nil {
		t.Fatal("no metadata")
	}
	if md.SnapshotID != "" || md.Status != layout.StatusSuccess || md.ProcessingDuration != 0 || md.WriteComplete != nil ||
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
	if len(mf.Districts) != 2 || mf.Districts[0] != (layout.Entry{DistrictID: "9", FileSize: 1 << 60}) || mf.Districts[1] != (layout.Entry{}) {
		t.Errorf("entries %+v", mf.Districts)
	}
	if r.Rankings != nil || r.InputExtra != nil {
		t.Errorf("rankings %v, inputExtra %v", r.Rankings, r.InputExtra)
	}

	var none layout.Root
	layout.DecodeFields(nil, &none)
	if !reflect.DeepEqual(none, layout.Root{}) || !none.Meta().WrittenWhole() || none.Meta().Writing() {
		t.Errorf("no fields: %+v", none)
	}
}

// The layout types written by the Firestore client read back as they
// were, and the fields stored are layout.EncodeFields': a root (inline and
// paged, with the input's optional fields and extra keys), a manifest
// page, the fence document and a district document.
func TestLayoutRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	coll := e.clean.Collection(DefaultCollection)
	inline, paging := e.writer(), e.writer(withPages(0, 4))
	check := func(name string, stored map[string]any, want, got any) {
		t.Helper()
		if enc := layout.EncodeFields(want); !reflect.DeepEqual(stored, enc) {
			t.Errorf("%s: stored\n%#v\nencodeFields\n%#v", name, stored, enc)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: read back\n%+v\nwant\n%+v", name, got, want)
		}
	}
	// store sets v at ref and reads the document back.
	store := func(ref *firestore.DocumentRef, v any) *firestore.DocumentSnapshot {
		t.Helper()
		if _, err := ref.Set(ctx, v); err != nil {
			t.Fatal(err)
		}
		doc, err := ref.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}
	for _, w := range []*Writer{inline, paging} {
		s := withExtras(model.Generate(day, 10, 3))
		closing := true
		s.Payload.Metadata.IsClosingPeriodData = &closing
		s.Payload.Metadata.CollectionDate = day
		f := buildRootForms(t, w, s)
		id := "inline"
		if f.in.Paged() {
			id = "paged"
		}
		ref := coll.Doc(id)
		for i, root := range []layout.Root{f.start, f.failed} {
			doc := store(ref, root)
			check(id+" root", doc.Data(), &root, layout.ReadRoot(doc))
			if i == 1 && f.in.Paged() {
				page := f.failedPages[0]
				pdoc := store(ref.Collection(layout.PagesCollection).Doc(layout.PageID(0)), page)
				check("page", pdoc.Data(), page, layout.ReadPage(pdoc))
			}
		}
	}

	in := rootInput{layout.Input{Fence: "000000000000042", Backend: "postgres", KeyHash: "0123456789abcdef01234567"}}
	fence := in.FenceDoc(time.Now())
	fdoc := store(coll.Doc("fence").Collection(layout.FenceCollection).Doc(layout.FenceDocID), fence)
	check("fence", fdoc.Data(), fence, layout.ReadFence(fdoc))

	s := model.Generate(day, 1, 5)
	d := s.Payload.Districts[0]
	data, err := d.Data()
	if err != nil {
		t.Fatal(err)
	}
	doc := layout.DistrictDoc(s, d, data, in.Fence)
	ddoc := store(coll.Doc("district").Collection(layout.DistrictsCollection).Doc(layout.DistrictDocID(d.DistrictID)), doc)
	dd := layout.ReadDistrict(ddoc)
	if !reflect.DeepEqual(ddoc.Data(), doc) || !reflect.DeepEqual(map[string]any(dd.Data), map[string]any(data)) ||
		dd.DistrictID != d.DistrictID || dd.Status != layout.EntrySuccess || dd.WriterFence != in.Fence {
		t.Errorf("district document: read back %+v", dd.Envelope)
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if want := []string{layout.FieldCollectedAt, layout.FieldData, layout.FieldDistrictID, layout.FieldDistrictName, layout.FieldStatus, layout.FieldWriterFence}; !slices.Equal(keys, want) {
		t.Errorf("district document fields %v, want %v", keys, want)
	}
}
