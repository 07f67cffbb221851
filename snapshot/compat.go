package snapshot

import (
	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/model"
)

// Reads of stored documents as maps (DocumentSnapshot.Data), for the code
// that does not read them into the layout types yet (repair.go, root.go,
// fence.go, hash.go, numbers.go, pages.go and their tests). Each is the typed
// read it names, on the map; once its callers read the layout types, it
// goes. They look up single fields rather than decode the whole metadata:
// repair calls some once per district.

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

// currentForm is rootMetadata.currentForm of root metadata md.
func currentForm(md map[string]any) bool {
	ws, _ := md[fieldWriteState].(string)
	return ws != ""
}

// writtenWhole is rootMetadata.writtenWhole of root metadata md.
func writtenWhole(md map[string]any) bool {
	done, flagged := md[fieldWriteComplete].(bool)
	return (done || !flagged) && !writing(md)
}

// fromRoot is rootSnapshot of a root's fields.
func fromRoot(root map[string]any, districts map[string]model.Object) (*model.Snapshot, error) {
	return rootSnapshot(decodeRoot(root), districts)
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
	r.expandPages(pages)
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
