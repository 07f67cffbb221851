package layout

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
	PagesCollection = "manifest"
	entriesInPages  = "pages"
	// DefaultPageSize keeps a page far under 1 MiB: an entry is about 200
	// bytes, and a failed one's errorMessage may add a few hundred more.
	DefaultPageSize = 1000
	// DefaultPageThreshold is the largest estimated root (model.RootEstimate,
	// itself from above) kept inline: a margin under 1 MiB for what the
	// estimate cannot know, such as the errorMessages of failed chunks.
	DefaultPageThreshold = model.MaxDocumentBytes - 64<<10
)

// Page is one manifest page: entries [first, first+len) of the
// manifest, in input order.
type Page struct {
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
	return manifestEntry{DistrictID: p.DistrictID, FileName: DistrictDocID(p.DistrictID), Status: p.Status,
		FileSize: p.FileSize, ContentHash: p.ContentHash, LastModified: p.LastModified, ErrorMessage: p.ErrorMessage}
}

// PageID is page n's document id: zero-padded, so ids sort as pages do.
func PageID(n int) string { return fmt.Sprintf("%05d", n) }

// Paginate decides the form of in's manifest from the estimated root
// (in.RootEstimate, validation's): inline while it fits under threshold,
// else pages of pageSize entries.
func (in *Input) Paginate(threshold, pageSize int) {
	if in.RootEstimate <= threshold {
		return
	}
	in.PageSize = pageSize
	in.PageOf = make(map[string]int, len(in.Snap.Payload.Districts))
	for i, d := range in.Snap.Payload.Districts {
		in.PageOf[d.DistrictID] = i / in.PageSize
	}
}

// Paged reports whether in's manifest entries live in manifest pages.
func (in Input) Paged() bool { return in.PageSize > 0 }

// Split divides manifest m into the root's manifest and the pages: m as it
// is, and no pages, for the inline form.
func (in Input) Split(m Manifest) (Manifest, []Page) {
	if !in.Paged() {
		return m, nil
	}
	var pages []Page
	for first := 0; first < len(m.Districts); first += in.PageSize {
		p := Page{SnapshotID: in.ID, Page: int64(len(pages)), First: int64(first)}
		for _, e := range m.Districts[first:min(first+in.PageSize, len(m.Districts))] {
			p.Districts = append(p.Districts, toPage(e))
		}
		pages = append(pages, p)
	}
	m.Districts = nil
	m.EntriesIn, m.Pages, m.PageSize = entriesInPages, int64(len(pages)), int64(in.PageSize)
	return m, pages
}

// Paged reports whether a stored manifest keeps its entries in manifest
// pages.
func (m *Manifest) Paged() bool { return m.EntriesIn == entriesInPages }

// ExpandPages puts the entries of a paged root's manifest pages into its
// manifest's Districts, in page order, so that code reading the root sees
// the manifest whole in either form. pages are the stored page documents,
// in id order; those the root does not count (stale) are left out.
func (r *Root) ExpandPages(pages []StoredPage) {
	if !r.Manifest.Paged() {
		return
	}
	entries := []manifestEntry{}
	for _, p := range pages {
		if !r.Manifest.counts(p.ID) {
			continue
		}
		var page Page
		DecodeFields(p.Fields, &page)
		for _, e := range page.Districts {
			entries = append(entries, e.entry())
		}
	}
	r.Manifest.Districts = entries
}

// StoredPage is a stored manifest page: its id and its fields, as
// DocumentSnapshot.Data gives them (FieldsOf, on the Firestore API).
type StoredPage struct {
	ID     string
	Fields map[string]any
}

// SnapshotPages are the stored pages docs, read by the Firestore client.
func SnapshotPages(docs []*firestore.DocumentSnapshot) []StoredPage {
	pages := make([]StoredPage, len(docs))
	for i, d := range docs {
		pages[i] = StoredPage{ID: d.Ref.ID, Fields: d.Data()}
	}
	return pages
}

// APIPages are the stored pages docs, read on the Firestore API.
func APIPages(docs []*pb.Document) []StoredPage {
	pages := make([]StoredPage, len(docs))
	for i, d := range docs {
		pages[i] = StoredPage{ID: BaseName(d.GetName()), Fields: FieldsOf(d)}
	}
	return pages
}

// counts reports whether a paged manifest counts the page stored under id.
func (m *Manifest) counts(id string) bool {
	i, err := strconv.Atoi(id)
	return err == nil && id == PageID(i) && int64(i) < m.Pages
}

// PageProblems says where the stored manifest pages disagree with the
// root: a paged root counts manifest.pages pages, 00000 onwards, each
// naming the snapshot; an inline one has none.
func (r *Root) PageProblems(id string, pages []*firestore.DocumentSnapshot) []string {
	var probs []string
	n := int64(0)
	if r.Manifest.Paged() {
		n = r.Manifest.Pages
	}
	have := map[string]bool{}
	for _, p := range pages {
		have[p.Ref.ID] = true
		switch named := ReadPage(p).SnapshotID; {
		case !r.Manifest.Paged() || !r.Manifest.counts(p.Ref.ID):
			probs = append(probs, fmt.Sprintf("manifest page %s is stored, but the root counts %s", p.Ref.ID, plural.N(int(n), "page")))
		case named != id:
			probs = append(probs, fmt.Sprintf("manifest page %s names snapshot %v", p.Ref.ID, named))
		}
	}
	for i := range int(n) {
		if !have[PageID(i)] {
			probs = append(probs, fmt.Sprintf("manifest page %s is missing (the root counts %s)", PageID(i), plural.N(int(n), "page")))
		}
	}
	return probs
}
