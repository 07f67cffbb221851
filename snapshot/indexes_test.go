package snapshot

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/internal/indexcount"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// indexConfig is the index configuration shipped for production.
const indexConfig = "../firestore.indexes.json"

// The index entries of the largest documents a write stores, counted by
// Firestore's documented rules (internal/indexcount) on the documents as
// the emulator stores them, under today's indexing (the composite index,
// no exemptions) and under the exemptions shipped in firestore.indexes.json.
// With them every document is far under Firestore's 40,000 entries, and a
// root's, a manifest page's and a district document's entries do not grow
// with the districts or clubs it holds: a write's index fan-out per
// document is constant. Every exemption must name a field these documents
// have, so that a misspelt path cannot pass unnoticed.
func TestIndexEntries(t *testing.T) {
	t.Parallel()
	shipped, err := indexcount.Load(indexConfig)
	if err != nil {
		t.Fatal(err)
	}
	today := shipped.WithoutExemptions()
	e := newEnv(t)
	ctx := context.Background()

	type figure struct {
		doc           string
		without, with int
	}
	var figures []figure
	seen := map[string][]map[string]any{} // collection group → documents measured
	// measure stores doc at ref, reads it back and counts its entries.
	measure := func(name string, ref *firestore.DocumentRef, doc any) figure {
		t.Helper()
		if _, err := ref.Set(ctx, doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		snap, err := ref.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		group := ref.Parent.ID
		seen[group] = append(seen[group], snap.Data())
		without, err := today.CountMap(group, snap.Data())
		if err != nil {
			t.Fatal(err)
		}
		with, err := shipped.CountMap(group, snap.Data())
		if err != nil {
			t.Fatal(err)
		}
		f := figure{name, without.Total(), with.Total()}
		if f.with >= indexcount.MaxEntriesPerDocument {
			t.Errorf("%s: %d index entries with the exemptions, Firestore's limit is %d", name, f.with, indexcount.MaxEntriesPerDocument)
		}
		return f
	}
	roots := e.clean.Collection(DefaultCollection)
	inline := &Writer{cfg: config{pageThreshold: layout.DefaultPageThreshold, pageSize: layout.DefaultPageSize}}
	paging := &Writer{cfg: config{pageThreshold: 0, pageSize: layout.DefaultPageSize}}
	// constant checks that the entries with the exemptions of the large
	// document are those of the small one of the same kind.
	constant := func(large, small figure) {
		t.Helper()
		if large.with != small.with {
			t.Errorf("%s: %d index entries with the exemptions, %s: %d; they should not grow with its size",
				large.doc, large.with, small.doc, small.with)
		}
	}

	// The largest inline root: 3,900 districts (the most kept inline),
	// every one failed, beside the same root of 10 districts.
	var inlineRoots [2]figure
	for i, n := range []int{3900, 10} {
		f := buildRootForms(t, inline, withExtras(model.Generate(day, n, 1)))
		if f.in.Paged() {
			t.Fatalf("%d districts: paged, want inline", n)
		}
		inlineRoots[i] = measure(fmt.Sprintf("root, inline, %d districts all failed", n), roots.Doc(fmt.Sprintf("inline-%d", n)), f.failed)
	}
	figures = append(figures, inlineRoots[0])
	constant(inlineRoots[0], inlineRoots[1])

	// The reference: a 2,000-district root whose write succeeded.
	s := withExtras(model.Generate(day, 2000, 1))
	f := buildRootForms(t, inline, s)
	done := layout.State{Status: layout.StatusSuccess, Complete: true, Entries: map[string]string{}, Modified: time.Now(), FinishedAt: time.Now()}
	for _, d := range s.Payload.Districts {
		done.Entries[d.DistrictID] = layout.EntrySuccess
	}
	md, err := f.in.Metadata(done)
	if err != nil {
		t.Fatal(err)
	}
	figures = append(figures, measure("root, inline, 2,000 districts all written", roots.Doc("inline-2000"),
		layout.Root{Metadata: &md, Manifest: f.in.Manifest(done), InputExtra: layout.InputExtra(s), Rankings: f.start.Rankings}))

	// The largest paged root and a full page: 20,000 districts, every one
	// failed with a long error, beside the same of 10 districts (one page).
	var pagedRoots, pages [2]figure
	for i, n := range []int{20000, 10} {
		f := buildRootForms(t, paging, withExtras(smallSnapshot(day, n)))
		ref := roots.Doc(fmt.Sprintf("paged-%d", n))
		pagedRoots[i] = measure(fmt.Sprintf("root, paged, %d districts all failed", n), ref, f.failed)
		page := f.failedPages[0]
		pages[i] = measure(fmt.Sprintf("manifest page, %d entries all failed", len(page.Districts)), ref.Collection(layout.PagesCollection).Doc(layout.PageID(0)), page)
	}
	figures = append(figures, pagedRoots[0], pages[0])
	constant(pagedRoots[0], pagedRoots[1])
	constant(pages[0], pages[1])

	// The largest generated district document (the most clubs, so the
	// longest lists), found among three seeds' by counting them before
	// they are stored, beside a district with almost no data.
	var largest map[string]any
	most := -1
	for seed := range int64(3) {
		s := model.Generate(day, 200, seed+1)
		for _, d := range s.Payload.Districts {
			doc := layout.DistrictDoc(s, d, memData(d), "000000000000001")
			n, err := today.CountMap("districts", doc)
			if err != nil {
				t.Fatal(err)
			}
			if n.Total() > most {
				most, largest = n.Total(), doc
			}
		}
	}
	districts := roots.Doc("districts").Collection("districts")
	big := measure("district document, the largest generated", districts.Doc(layout.DistrictDocID(largest["districtId"].(string))), largest)
	tiny := smallSnapshot(day, 1)
	small := measure("district document, almost no data", districts.Doc("district_tiny"), layout.DistrictDoc(tiny, tiny.Payload.Districts[0], memData(tiny.Payload.Districts[0]), "000000000000001"))
	figures = append(figures, big)
	constant(big, small)

	// Every exemption names a field of a document measured here.
	for _, o := range shipped.Exemptions() {
		docs, ok := seen[o.CollectionGroup]
		if o.CollectionGroup != DefaultCollection && !ok {
			continue // another collection's (none yet)
		}
		p, err := indexcount.ParseFieldPath(o.FieldPath)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, d := range docs {
			found = found || hasField(d, p)
		}
		if !found {
			t.Errorf("exemption %s in %s: no document measured has that field", o.FieldPath, o.CollectionGroup)
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "index entries per document (Firestore's limit %d):\n| document | without exemptions | with |\n|---|---:|---:|\n", indexcount.MaxEntriesPerDocument)
	for _, f := range figures {
		fmt.Fprintf(&b, "| %s | %d | %d |\n", f.doc, f.without, f.with)
	}
	t.Log(b.String())
}

// withExtras gives s what the application's input may add and the
// generator leaves out, collection failures (districtErrors) and keys the
// model does not name (kept in inputExtra), so that the root has every
// field an exemption names.
func withExtras(s *model.Snapshot) *model.Snapshot {
	s.Payload.Metadata.DistrictErrors = []any{map[string]any{"districtId": "999", "error": "dashboard returned 503"}}
	s.Extra = model.Object{"exportedBy": "collector 4.2"}
	return s
}

// hasField reports whether field path p leads to a value in doc.
func hasField(doc map[string]any, p []string) bool {
	var v any = doc
	for _, k := range p {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[k]; !ok {
			return false
		}
	}
	return true
}
