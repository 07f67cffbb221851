package snapshot

import "cloud.google.com/go/firestore"

// Reads of stored documents as maps (DocumentSnapshot.Data), for tests
// that check what is stored independently of the layout types the
// package reads it into (rootread.go). Each is the typed read it names,
// on the map.

// asMap is v as a map, nil when it is none.
func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// writing is rootMetadata.writing of root metadata md.
func writing(md map[string]any) bool {
	ws, _ := md[fieldWriteState].(string)
	st, _ := md[fieldStatus].(string)
	return inProgress(ws, st)
}

// pagedRoot is rootDocument.paged of a root's fields.
func pagedRoot(root map[string]any) bool {
	var mf manifest
	decodeFields(asMap(root[fieldManifest]), &mf)
	return mf.paged()
}

// expandPages is rootDocument.expandPages on a root's fields: it sets
// their manifest.districts to the pages' entries as an inline manifest
// holds them. It modifies root, a map of the caller's own.
func expandPages(root map[string]any, pages []*firestore.DocumentSnapshot) {
	mf := asMap(root[fieldManifest])
	var r rootDocument
	decodeFields(mf, &r.Manifest)
	if mf == nil || !r.Manifest.paged() {
		return
	}
	r.expandPages(snapshotPages(pages))
	entries := make([]any, len(r.Manifest.Districts))
	for i, e := range r.Manifest.Districts {
		entries[i] = encodeFields(e)
	}
	mf[fieldDistricts] = entries
}

// pageProblems is rootDocument.pageProblems of a root's fields.
func pageProblems(id string, root map[string]any, pages []*firestore.DocumentSnapshot) []string {
	var r rootDocument
	decodeFields(asMap(root[fieldManifest]), &r.Manifest)
	return r.pageProblems(id, pages)
}
