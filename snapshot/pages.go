package snapshot

import (
	"fmt"
	"strconv"

	"cloud.google.com/go/firestore"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"

	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/model"
)

// The manifest's two forms. Inline, the application's layout, the root's
// manifest.districts holds an entry per district. A snapshot whose root
// would not fit Firestore's 1 MiB with them (about 5,000 districts) is
// paged: its entries live, in input order, in manifest pages
// snapshots/{id}/manifest/{00000, 00001, …} of pageSize entries each, and
// the root's manifest keeps the counts, no districts array, and where the
// entries are (entriesIn "pages", pages, pageSize). The metadata's id lists
// stay in the root in both forms.
const (
	pagesCollection = "manifest"
	entriesInPages  = "pages"
	// defaultPageSize keeps a page far under 1 MiB: an entry is about 200
	// bytes, and a failed one's errorMessage may add a few hundred more.
	defaultPageSize = 1000
	// defaultPageThreshold is the largest estimated root (model.RootEstimate,
	// itself from above) kept inline: a margin under 1 MiB for what the
	// estimate cannot know, such as the errorMessages of failed chunks.
	defaultPageThreshold = model.MaxDocumentBytes - 64<<10
)

// pageDocument is one manifest page: entries [first, first+len) of the
// manifest, in input order.
type pageDocument struct {
	SnapshotID string      `firestore:"snapshotId"`
	Page       int64       `firestore:"page"`
	First      int64       `firestore:"first"`
	Districts  []pageEntry `firestore:"districts"`
}

// pageEntry is a manifest entry as a page holds it: only snapwriter reads
// pages, so the keys are short and fileName ("district_{id}") is left
// out. That makes an entry about 110 bytes on the wire instead of 210, and
// the root transaction, which writes every page, about 3.5 MB instead of 5
// at 20,000 districts.
type pageEntry struct {
	DistrictID   string `firestore:"id"`
	Status       string `firestore:"st"`
	FileSize     int64  `firestore:"sz"`
	ContentHash  string `firestore:"h"`
	LastModified string `firestore:"t"`
	ErrorMessage string `firestore:"err,omitempty"`
}

// toPage is manifest entry e as a page holds it.
func toPage(e manifestEntry) pageEntry {
	return pageEntry{DistrictID: e.DistrictID, Status: e.Status, FileSize: e.FileSize, ContentHash: e.ContentHash,
		LastModified: e.LastModified, ErrorMessage: e.ErrorMessage}
}

// entry is page entry p as the manifest entry it stands for, as
// manifest.districts holds entries (toPage's inverse).
func (p pageEntry) entry() manifestEntry {
	return manifestEntry{DistrictID: p.DistrictID, FileName: districtDocID(p.DistrictID), Status: p.Status,
		FileSize: p.FileSize, ContentHash: p.ContentHash, LastModified: p.LastModified, ErrorMessage: p.ErrorMessage}
}

// pageID is page n's document id: zero-padded, so ids sort as pages do.
func pageID(n int) string { return fmt.Sprintf("%05d", n) }

// paginate decides the form of in's manifest from the estimated root
// (in.rootEstimate, validation's): inline while it fits under the writer's
// threshold, else pages.
func (w *Writer) paginate(in *rootInput) {
	if in.rootEstimate <= w.cfg.pageThreshold {
		return
	}
	in.pageSize = w.cfg.pageSize
	in.pageOf = make(map[string]int, len(in.snap.Payload.Districts))
	for i, d := range in.snap.Payload.Districts {
		in.pageOf[d.DistrictID] = i / in.pageSize
	}
}

// paged reports whether in's manifest entries live in manifest pages.
func (in rootInput) paged() bool { return in.pageSize > 0 }

// split divides manifest m into the root's manifest and the pages: m as it
// is, and no pages, for the inline form.
func (in rootInput) split(m manifest) (manifest, []pageDocument) {
	if !in.paged() {
		return m, nil
	}
	var pages []pageDocument
	for first := 0; first < len(m.Districts); first += in.pageSize {
		p := pageDocument{SnapshotID: in.id, Page: int64(len(pages)), First: int64(first)}
		for _, e := range m.Districts[first:min(first+in.pageSize, len(m.Districts))] {
			p.Districts = append(p.Districts, toPage(e))
		}
		pages = append(pages, p)
	}
	m.Districts = nil
	m.EntriesIn, m.Pages, m.PageSize = entriesInPages, int64(len(pages)), int64(in.pageSize)
	return m, pages
}

// pagesRef is snapshot id's manifest pages collection.
func (w *Writer) pagesRef(id string) *firestore.CollectionRef {
	return w.root(id).Collection(pagesCollection)
}

// paged reports whether a stored manifest keeps its entries in manifest
// pages.
func (m *manifest) paged() bool { return m.EntriesIn == entriesInPages }

// expandPages puts the entries of a paged root's manifest pages into its
// manifest's Districts, in page order, so that code reading the root sees
// the manifest whole in either form. pages are the stored page documents,
// in id order; those the root does not count (stale) are left out.
func (r *rootDocument) expandPages(pages []storedPage) {
	if !r.Manifest.paged() {
		return
	}
	entries := []manifestEntry{}
	for _, p := range pages {
		if !r.Manifest.counts(p.id) {
			continue
		}
		var page pageDocument
		decodeFields(p.fields, &page)
		for _, e := range page.Districts {
			entries = append(entries, e.entry())
		}
	}
	r.Manifest.Districts = entries
}

// storedPage is a stored manifest page: its id and its fields, as
// DocumentSnapshot.Data gives them (fieldsOf, on the Firestore API).
type storedPage struct {
	id     string
	fields map[string]any
}

// snapshotPages are the stored pages docs, read by the Firestore client.
func snapshotPages(docs []*firestore.DocumentSnapshot) []storedPage {
	pages := make([]storedPage, len(docs))
	for i, d := range docs {
		pages[i] = storedPage{id: d.Ref.ID, fields: d.Data()}
	}
	return pages
}

// apiPages are the stored pages docs, read on the Firestore API.
func apiPages(docs []*pb.Document) []storedPage {
	pages := make([]storedPage, len(docs))
	for i, d := range docs {
		pages[i] = storedPage{id: lastSegment(d.GetName()), fields: fieldsOf(d)}
	}
	return pages
}

// counts reports whether a paged manifest counts the page stored under id.
func (m *manifest) counts(id string) bool {
	i, err := strconv.Atoi(id)
	return err == nil && id == pageID(i) && int64(i) < m.Pages
}

// pageProblems says where the stored manifest pages disagree with the
// root: a paged root counts manifest.pages pages, 00000 onwards, each
// naming the snapshot; an inline one has none.
func (r *rootDocument) pageProblems(id string, pages []*firestore.DocumentSnapshot) []string {
	var probs []string
	n := int64(0)
	if r.Manifest.paged() {
		n = r.Manifest.Pages
	}
	have := map[string]bool{}
	for _, p := range pages {
		have[p.Ref.ID] = true
		switch named := readPage(p).SnapshotID; {
		case !r.Manifest.paged() || !r.Manifest.counts(p.Ref.ID):
			probs = append(probs, fmt.Sprintf("manifest page %s is stored, but the root counts %s", p.Ref.ID, plural.N(int(n), "page")))
		case named != id:
			probs = append(probs, fmt.Sprintf("manifest page %s names snapshot %v", p.Ref.ID, named))
		}
	}
	for i := range int(n) {
		if !have[pageID(i)] {
			probs = append(probs, fmt.Sprintf("manifest page %s is missing (the root counts %s)", pageID(i), plural.N(int(n), "page")))
		}
	}
	return probs
}
