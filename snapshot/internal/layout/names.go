package layout

import "cloud.google.com/go/firestore"

// Names are the references and full resource names of one snapshot's
// documents, built once per snapshot (NewNames): its root, its fence
// document, its district documents and its manifest pages. A reference's
// Path is the document's full name on the Firestore API
// ("projects/{project}/databases/{database}/documents/{collection}/{date}/…"),
// which the commits, reads and deletes sent on that API name it by.
type Names struct {
	// Root is the root document, {collection}/{date}.
	Root *firestore.DocumentRef
	// Fence is the fence document, {collection}/{date}/snapwriter/fence
	// (see FenceCollection).
	Fence *firestore.DocumentRef
	// Gate is the gate's record, {collection}/{date}/snapwriter/gate
	// (see GateDocID).
	Gate *firestore.DocumentRef
	// Districts is the collection of the district documents,
	// {collection}/{date}/districts.
	Districts *firestore.CollectionRef
	// Pages is the collection of the manifest pages,
	// {collection}/{date}/manifest.
	Pages *firestore.CollectionRef
}

// NewNames are the names of snapshot id's documents in collection
// snapshots, whose client gives the project and database.
func NewNames(snapshots *firestore.CollectionRef, id string) Names {
	root := snapshots.Doc(id)
	return Names{
		Root:      root,
		Fence:     root.Collection(FenceCollection).Doc(FenceDocID),
		Gate:      root.Collection(FenceCollection).Doc(GateDocID),
		Districts: root.Collection(DistrictsCollection),
		Pages:     root.Collection(PagesCollection),
	}
}

// District is district districtID's document.
func (n Names) District(districtID string) *firestore.DocumentRef {
	return n.Districts.Doc(DistrictDocID(districtID))
}

// DistrictName is the full name of district districtID's document:
// District(districtID).Path, without building the reference.
func (n Names) DistrictName(districtID string) string {
	return n.Districts.Path + "/" + DistrictDocID(districtID)
}

// Page is manifest page i's document.
func (n Names) Page(i int) *firestore.DocumentRef { return n.Pages.Doc(PageID(i)) }
