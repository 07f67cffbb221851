package snapshot

import (
	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// Reads of stored documents as maps (DocumentSnapshot.Data), for tests
// that check what is stored independently of the layout types the
// package reads it into (rootread.go). Each is the typed read it names,
// on the map.

// asMap is v as a map, nil when it is none.
func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// writing is layout.Metadata.Writing of root metadata md.
func writing(md map[string]any) bool {
	ws, _ := md[layout.FieldWriteState].(string)
	st, _ := md[layout.FieldStatus].(string)
	return layout.InProgress(ws, st)
}

// pagedRoot is layout.Manifest.Paged of a root's fields.
func pagedRoot(root map[string]any) bool {
	var mf layout.Manifest
	layout.DecodeFields(asMap(root[layout.FieldManifest]), &mf)
	return mf.Paged()
}

// expandPages is layout.Root.ExpandPages on a root's fields: it sets
// their manifest.districts to the pages' entries as an inline manifest
// holds them. It modifies root, a map of the caller's own.
func expandPages(root map[string]any, pages []*firestore.DocumentSnapshot) {
	mf := asMap(root[layout.FieldManifest])
	var r layout.Root
	layout.DecodeFields(mf, &r.Manifest)
	if mf == nil || !r.Manifest.Paged() {
		return
	}
	r.ExpandPages(layout.SnapshotPages(pages))
	entries := make([]any, len(r.Manifest.Districts))
	for i, e := range r.Manifest.Districts {
		entries[i] = layout.EncodeFields(e)
	}
	mf[layout.FieldDistricts] = entries
}

// pageProblems is layout.Root.PageProblems of a root's fields.
func pageProblems(id string, root map[string]any, pages []*firestore.DocumentSnapshot) []string {
	var r layout.Root
	layout.DecodeFields(asMap(root[layout.FieldManifest]), &r.Manifest)
	return r.PageProblems(id, pages)
}
