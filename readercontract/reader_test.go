package readercontract

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// This file is the reader contract: what the TypeScript application's
// FirestoreSnapshotStorage does with the documents, in Go, query for query
// and field for field. Nothing here knows snapwriter's own fields
// (writerFence, writeState, inputSnapshotId, payloadMetadata, the fence
// document, …): the application's readers ignore them.
//
//	snapshots/{YYYY-MM-DD}                          root: {metadata, manifest, rankings?}
//	snapshots/{YYYY-MM-DD}/districts/district_{id}  {districtId, districtName, collectedAt, status, data}

// collection is the application's snapshot collection.
const collection = "snapshots"

// The application's status vocabulary.
var (
	snapshotStatuses = map[string]bool{"success": true, "partial": true, "failed": true}
	entryStatuses    = map[string]bool{"success": true, "failed": true}
)

// appListEntry is one snapshot as the application lists it.
type appListEntry struct {
	DocID string
	// SnapshotID is metadata.snapshotId: the id the application shows and
	// passes back to getSnapshot.
	SnapshotID string
	// Status is metadata.status.
	Status string
	// DistrictCount is len(metadata.successfulDistricts).
	DistrictCount int
	// WriteComplete is metadata.writeComplete; absent means complete.
	WriteComplete bool
}

// appManifestEntry is one manifest.districts[] entry as the application
// reads it.
type appManifestEntry struct {
	DistrictID   string
	Status       string
	ErrorMessage string
}

// appDistrict is one district of getSnapshot: its document's data.
type appDistrict struct {
	ID   string
	Data map[string]any
}

// appSnapshot is what getSnapshot returns.
type appSnapshot struct {
	Meta      appListEntry
	Manifest  []appManifestEntry
	Districts []appDistrict
}

// appLatestSuccessful is the application's newest successful snapshot:
//
//	where("metadata.status", "==", "success").orderBy(documentId, "desc").limit(1)
//
// It returns the document id, "" when there is none. (Production serves
// this with the composite index in firestore.indexes.json; the emulator
// serves it as it is.)
func appLatestSuccessful(ctx context.Context, c *firestore.Client) (string, error) {
	docs, err := c.Collection(collection).Where("metadata.status", "==", "success").
		OrderBy(firestore.DocumentID, firestore.Desc).Limit(1).Documents(ctx).GetAll()
	if err != nil {
		return "", fmt.Errorf("newest successful snapshot: %w", err)
	}
	if len(docs) == 0 {
		return "", nil
	}
	return docs[0].Ref.ID, nil
}

// appLatest is the application's newest snapshot of any status:
//
//	orderBy(documentId, "desc").limit(1)
//
// The emulator refuses a descending scan of document ids ("Firestore does
// not support descending key scans"), which production Firestore serves,
// and it refuses it with a filter on the id too (where(documentId, ">=",
// …), "!=", ">", "not-in" were tried); a filter on another field would
// not return the same documents. So the application's query is sent first
// and, when refused for that reason only, the ids are scanned ascending
// and the last is taken: the same answer.
func appLatest(ctx context.Context, c *firestore.Client) (string, error) {
	coll := c.Collection(collection)
	docs, err := coll.OrderBy(firestore.DocumentID, firestore.Desc).Limit(1).Documents(ctx).GetAll()
	if err == nil {
		if len(docs) == 0 {
			return "", nil
		}
		return docs[0].Ref.ID, nil
	}
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "descending key scans") {
		return "", fmt.Errorf("newest snapshot: %w", err)
	}
	it := coll.OrderBy(firestore.DocumentID, firestore.Asc).Select().Documents(ctx)
	defer it.Stop()
	last := ""
	for {
		d, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return last, nil
		}
		if err != nil {
			return "", fmt.Errorf("newest snapshot: %w", err)
		}
		last = d.Ref.ID
	}
}

// appList is the application's snapshot list: every root document, newest
// id first.
func appList(ctx context.Context, c *firestore.Client) ([]appListEntry, error) {
	docs, err := c.Collection(collection).OrderBy(firestore.DocumentID, firestore.Asc).Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("listing snapshots: %w", err)
	}
	out := make([]appListEntry, 0, len(docs))
	for i := len(docs) - 1; i >= 0; i-- {
		e, err := appMeta(docs[i].Ref.ID, docs[i].Data())
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// appMeta reads a root's metadata as the application does.
func appMeta(docID string, root map[string]any) (appListEntry, error) {
	md, ok := root["metadata"].(map[string]any)
	if !ok {
		return appListEntry{}, fmt.Errorf("snapshot %s: metadata is %T, not a map", docID, root["metadata"])
	}
	e := appListEntry{DocID: docID, WriteComplete: true}
	e.SnapshotID, _ = md["snapshotId"].(string)
	e.Status, _ = md["status"].(string)
	ok1, err := stringList(md["successfulDistricts"])
	if err != nil {
		return e, fmt.Errorf("snapshot %s: metadata.successfulDistricts: %w", docID, err)
	}
	e.DistrictCount = len(ok1)
	if v, present := md["writeComplete"]; present {
		b, isBool := v.(bool)
		if !isBool {
			return e, fmt.Errorf("snapshot %s: metadata.writeComplete is %T, not a boolean", docID, v)
		}
		e.WriteComplete = b
	}
	return e, nil
}

// appManifest reads manifest.districts[] as the application does.
func appManifest(docID string, root map[string]any) ([]appManifestEntry, error) {
	mf, ok := root["manifest"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("snapshot %s: manifest is %T, not a map", docID, root["manifest"])
	}
	list, ok := mf["districts"].([]any)
	if !ok {
		return nil, fmt.Errorf("snapshot %s: manifest.districts is %T, not an array", docID, mf["districts"])
	}
	out := make([]appManifestEntry, 0, len(list))
	for i, x := range list {
		m, ok := x.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("snapshot %s: manifest.districts[%d] is %T, not a map", docID, i, x)
		}
		var e appManifestEntry
		e.DistrictID, _ = m["districtId"].(string)
		e.Status, _ = m["status"].(string)
		e.ErrorMessage, _ = m["errorMessage"].(string)
		out = append(out, e)
	}
	return out, nil
}

// appGetSnapshot is the application's getSnapshot(id): the root's
// metadata, and the districts its manifest lists as "success", each read
// from its document, which must exist and hold a data map. It returns nil
// when the root does not exist.
func appGetSnapshot(ctx context.Context, c *firestore.Client, id string) (*appSnapshot, error) {
	ref := c.Collection(collection).Doc(id)
	doc, err := ref.Get(ctx)
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	root := doc.Data()
	meta, err := appMeta(id, root)
	if err != nil {
		return nil, err
	}
	entries, err := appManifest(id, root)
	if err != nil {
		return nil, err
	}
	var refs []*firestore.DocumentRef
	for _, e := range entries {
		if e.Status == "success" {
			refs = append(refs, ref.Collection("districts").Doc("district_"+e.DistrictID))
		}
	}
	s := &appSnapshot{Meta: meta, Manifest: entries}
	if len(refs) == 0 {
		return s, nil
	}
	docs, err := c.GetAll(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: reading districts: %w", id, err)
	}
	for _, d := range docs {
		if !d.Exists() {
			return nil, fmt.Errorf("snapshot %s: manifest says %s is stored, but it does not exist", id, d.Ref.ID)
		}
		data, ok := d.Data()["data"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("snapshot %s: %s: data is %T, not a map", id, d.Ref.ID, d.Data()["data"])
		}
		s.Districts = append(s.Districts, appDistrict{ID: strings.TrimPrefix(d.Ref.ID, "district_"), Data: data})
	}
	return s, nil
}

// stringList reads an array of strings; absent is an error (the
// application's readers take its length).
func stringList(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%T, not an array", v)
	}
	out := make([]string, len(list))
	for i, x := range list {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("element %d is %T, not a string", i, x)
		}
		out[i] = s
	}
	return out, nil
}
