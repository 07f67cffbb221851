package snapshot

import (
	"context"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

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

	in := rootInput{Input: layout.Input{Fence: "000000000000042", Backend: "postgres", KeyHash: "0123456789abcdef01234567"}}
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
