package readercontract

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/model"
)

// appFixture builds a snapshot as the TypeScript application writes it
// (docs/layout.md): the root {metadata, manifest, rankings} for every
// district of in, of which only written have a district document. It has
// none of snapwriter's own fields (writerFence, writerLockBackend,
// payloadMetadata, payloadHash, writeState, inputSnapshotId).
func appFixture(date string, in *model.Snapshot, written []string, status string, writeComplete bool) (root map[string]any, docs map[string]map[string]any) {
	pm := in.Payload.Metadata
	isWritten := setOf(written)
	var all, ok, failed []any
	docs = map[string]map[string]any{}
	entries := make([]any, 0, len(in.Payload.Districts))
	modified := time.Date(2026, 11, 21, 7, 12, 0, 0, time.UTC).Format(time.RFC3339Nano)
	for _, d := range in.Payload.Districts {
		id := d.DistrictID
		all = append(all, id)
		doc := map[string]any{
			"districtId":   id,
			"districtName": "District " + id,
			"collectedAt":  pm.FetchedAt,
			"status":       "success",
			"data":         memData(d),
		}
		size, _ := model.Marshal(doc)
		e := map[string]any{
			"districtId":   id,
			"fileName":     "district_" + id,
			"fileSize":     int64(len(size)),
			"lastModified": modified,
		}
		if isWritten[id] {
			ok = append(ok, id)
			docs[id] = doc
			e["status"] = "success"
		} else {
			failed = append(failed, id)
			e["status"] = "failed"
			e["errorMessage"] = "Batch write failed after 3 retries: 4 DEADLINE_EXCEEDED: Deadline exceeded"
		}
		entries = append(entries, e)
	}
	nonNil := func(l []any) []any {
		if l == nil {
			return []any{}
		}
		return l
	}
	root = map[string]any{
		"metadata": map[string]any{
			"snapshotId":           date,
			"createdAt":            in.CreatedAt,
			"schemaVersion":        in.SchemaVersion,
			"calculationVersion":   in.CalculationVersion,
			"status":               status,
			"configuredDistricts":  nonNil(all),
			"successfulDistricts":  nonNil(ok),
			"failedDistricts":      nonNil(failed),
			"errors":               []any{},
			"processingDuration":   pm.ProcessingDurationMs,
			"source":               pm.Source,
			"dataAsOfDate":         pm.DataAsOfDate,
			"writeComplete":        writeComplete,
			"writeFailedDistricts": nonNil(failed),
		},
		"manifest": map[string]any{
			"snapshotId":          date,
			"createdAt":           in.CreatedAt,
			"districts":           entries,
			"totalDistricts":      int64(len(entries)),
			"successfulDistricts": int64(len(ok)),
			"failedDistricts":     int64(len(failed)),
		},
	}
	if in.Rankings != nil {
		root["rankings"] = in.Rankings
	}
	return root, docs
}

// putFixture stores a root and its district documents.
func putFixture(t *testing.T, c *firestore.Client, date string, root map[string]any, docs map[string]map[string]any) {
	t.Helper()
	ctx := context.Background()
	ref := c.Collection(collection).Doc(date)
	if _, err := ref.Set(ctx, root); err != nil {
		t.Fatalf("storing the root: %v", err)
	}
	bw := c.BulkWriter(ctx)
	var jobs []*firestore.BulkWriterJob
	for id, doc := range docs {
		j, err := bw.Set(ref.Collection("districts").Doc("district_"+id), doc)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	bw.End()
	for _, j := range jobs {
		if _, err := j.Results(); err != nil {
			t.Fatalf("storing a district document: %v", err)
		}
	}
}

// memData is the data of district d, for a test to read or change.
func memData(d model.DistrictStatistics) model.Object {
	data, err := d.Data()
	if err != nil {
		panic(fmt.Sprintf("district %s: %v", d.DistrictID, err))
	}
	return data
}
