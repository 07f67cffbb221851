package snapshot

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/model"
)

// ErrNotFound: no snapshot is stored under that id.
var ErrNotFound = errors.New("snapshot not found")

// Reader reads snapshots back in the input format.
type Reader struct {
	client     *firestore.Client
	collection string
}

// NewReader returns a Reader of collection ("" means "snapshots").
func NewReader(client *firestore.Client, collection string) *Reader {
	if collection == "" {
		collection = DefaultCollection
	}
	return &Reader{client: client, collection: collection}
}

// Summary describes one stored snapshot for listings.
type Summary struct {
	SnapshotID string `json:"snapshotId"`
	// State is "complete", "partial" or "writing" (a write in progress, or
	// one that died before recording its outcome).
	State           string   `json:"state"`
	Status          string   `json:"status"`
	Districts       int      `json:"districts"`
	FailedDistricts []string `json:"failedDistricts"`
	WriterFence     string   `json:"writerFence"`
	LockBackend     string   `json:"writerLockBackend,omitempty"`
	WriteFinishedAt string   `json:"writeFinishedAt,omitempty"`
}

// Get returns the snapshot stored under id, rebuilt in the input format.
// Districts whose write failed are absent; Summary says which.
func (r *Reader) Get(ctx context.Context, id string) (*model.Snapshot, error) {
	ref := r.client.Collection(r.collection).Doc(id)
	root, err := ref.Get(ctx)
	if status.Code(err) == codes.NotFound {
		return nil, fmt.Errorf("%s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", id, err)
	}
	docs, err := ref.Collection("districts").Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("reading districts of %s: %w", id, err)
	}
	districts := make(map[string]map[string]any, len(docs))
	for _, d := range docs {
		data := d.Data()
		dID, _ := data["districtId"].(string)
		if st, _ := data["status"].(string); dID == "" || st == entryFailed {
			continue
		}
		districts[dID] = data
	}
	s, err := fromRoot(root.Data(), districts)
	if err != nil {
		return nil, fmt.Errorf("decoding snapshot %s: %w", id, err)
	}
	return s, nil
}

// District returns one district's statistics from snapshot id, as they
// appear in the input's payload.districts. A district whose write failed is
// ErrNotFound, like one the snapshot does not have.
func (r *Reader) District(ctx context.Context, id, districtID string) (model.Object, error) {
	ref := r.client.Collection(r.collection).Doc(id)
	doc, err := ref.Collection("districts").Doc(districtDocID(districtID)).Get(ctx)
	if status.Code(err) == codes.NotFound {
		if _, rerr := ref.Get(ctx); status.Code(rerr) == codes.NotFound {
			return nil, fmt.Errorf("%s: %w", id, ErrNotFound)
		}
		return nil, fmt.Errorf("district %s of snapshot %s: %w", districtID, id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading district %s of %s: %w", districtID, id, err)
	}
	data := doc.Data()
	st, _ := data["status"].(string)
	stats, ok := data["data"].(map[string]any)
	if st == entryFailed || !ok {
		return nil, fmt.Errorf("district %s of snapshot %s: %w", districtID, id, ErrNotFound)
	}
	return model.Object(stats), nil
}

// Summary returns the listing entry of one snapshot.
func (r *Reader) Summary(ctx context.Context, id string) (*Summary, error) {
	doc, err := r.client.Collection(r.collection).Doc(id).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return nil, fmt.Errorf("%s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", id, err)
	}
	s := summarize(doc)
	return &s, nil
}

// List returns every snapshot, newest first. The scan runs in ascending id
// order and is reversed here: the emulator refuses descending key scans,
// and one summary per day is small.
func (r *Reader) List(ctx context.Context) ([]Summary, error) {
	it := r.client.Collection(r.collection).
		Select("metadata.status", "metadata.writeComplete", "metadata.writeFailedDistricts",
			"metadata.writerFence", "metadata.writerLockBackend", "metadata.writeFinishedAt",
			"metadata.configuredDistricts", "manifest.totalDistricts").
		OrderBy(firestore.DocumentID, firestore.Asc).Documents(ctx)
	defer it.Stop()
	var out []Summary
	for {
		doc, err := it.Next()
		if errors.Is(err, iterator.Done) {
			slices.Reverse(out)
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing snapshots: %w", err)
		}
		out = append(out, summarize(doc))
	}
}

// Latest returns the id of the newest snapshot whose status is "success"
// (complete writes only: partial and in-progress ones carry other statuses).
// Only document ids are read, in ascending order (see List), and the last
// one wins.
func (r *Reader) Latest(ctx context.Context) (string, error) {
	docs, err := r.client.Collection(r.collection).
		Where("metadata.status", "==", "success").Select().
		OrderBy(firestore.DocumentID, firestore.Asc).Documents(ctx).GetAll()
	if err != nil {
		return "", fmt.Errorf("finding the latest snapshot: %w", err)
	}
	if len(docs) == 0 {
		return "", fmt.Errorf("no successful snapshot: %w", ErrNotFound)
	}
	return docs[len(docs)-1].Ref.ID, nil
}

func summarize(doc *firestore.DocumentSnapshot) Summary {
	data := doc.Data()
	md := asMap(data["metadata"])
	s := Summary{SnapshotID: doc.Ref.ID, FailedDistricts: []string{}}
	s.Status, _ = md["status"].(string)
	s.WriterFence, _ = md["writerFence"].(string)
	s.LockBackend, _ = md["writerLockBackend"].(string)
	s.WriteFinishedAt, _ = md["writeFinishedAt"].(string)
	if n, ok := asMap(data["manifest"])["totalDistricts"].(int64); ok {
		s.Districts = int(n)
	} else if ids, ok := md["configuredDistricts"].([]any); ok {
		s.Districts = len(ids)
	}
	failed, _ := md["writeFailedDistricts"].([]any)
	for _, f := range failed {
		if id, ok := f.(string); ok {
			s.FailedDistricts = append(s.FailedDistricts, id)
		}
	}
	complete, hasFlag := md["writeComplete"].(bool)
	switch {
	case s.Status == statusWriting:
		s.State = "writing"
	case complete || !hasFlag: // roots of the TypeScript writer have no flag
		s.State = "complete"
	default:
		s.State = "partial"
	}
	return s
}
