package snapshot

import (
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/snapwriter/snapwriter/model"
)

// Status values of a manifest entry. "pending" exists only while a write is
// in progress; the TypeScript readers know "success" and "failed".
const (
	entryPending = "pending"
	entrySuccess = "success"
	entryFailed  = "failed"
)

// statusWriting marks a root whose districts are still being written, so
// readers looking for metadata.status == "success" never pick it up.
const statusWriting = "writing"

// districtDocID is the id of a district's document in the districts
// subcollection, as the TypeScript application names it.
func districtDocID(districtID string) string { return "district_" + districtID }

// districtDoc is the district document: the application's envelope around the
// district's statistics, which are stored verbatim under data, stamped with
// the fence of the writer that wrote it (a field the application's readers
// ignore), so that a commit whose outcome was lost can be checked.
func districtDoc(s *model.Snapshot, d model.DistrictStatistics, fence string) map[string]any {
	collected := s.Payload.Metadata.FetchedAt
	if collected == "" {
		collected = s.CreatedAt
	}
	return map[string]any{
		"districtId":   d.DistrictID,
		"districtName": "District " + d.DistrictID,
		"collectedAt":  collected,
		"status":       entrySuccess,
		"data":         d.Data,
		"writerFence":  fence,
	}
}

// rootInput holds what the root document is built from, so the start and
// finish transactions write the same metadata.
type rootInput struct {
	id        string
	snap      *model.Snapshot
	fence     string
	backend   string
	startedAt time.Time
	docs      map[string]map[string]any // district id → its document
	docSizes  map[string]int            // district id → document size, for the manifest
	hashes    map[string]string         // district id → the hash of its document
	// dataHashes: district id → the hash of its data alone.
	dataHashes map[string]string
	// payloadHash is the hash of the snapshot's own payload (payloadHash).
	payloadHash string
	// contended is set once a transaction of this write met another's
	// lock, so that it is explained in one WARNING, not one per retry.
	contended *atomic.Bool
}

// rootMetadata is the PerDistrictSnapshotMetadata of the application plus
// the writer's own fields. payloadMetadata keeps the input's metadata
// verbatim so `get` returns exactly what was written; the application's
// fields are still filled for its readers.
func (in rootInput) metadata(status string, complete bool, failed []string, finishedAt time.Time) (map[string]any, error) {
	s := in.snap
	pm := s.Payload.Metadata
	ids := districtIDs(s)
	configured, successful, failedIn := pm.ConfiguredDistricts, pm.SuccessfulDistricts, pm.FailedDistricts
	if configured == nil {
		configured = ids
	}
	if successful == nil {
		successful = ids
	}
	if failedIn == nil {
		failedIn = []string{}
	}
	verbatim, err := toObject(pm)
	if err != nil {
		return nil, fmt.Errorf("encoding payload metadata: %w", err)
	}
	errs := s.Errors
	if errs == nil {
		errs = []string{}
	}
	m := map[string]any{
		"snapshotId":           s.SnapshotID,
		"createdAt":            s.CreatedAt,
		"schemaVersion":        s.SchemaVersion,
		"calculationVersion":   s.CalculationVersion,
		"status":               status,
		"configuredDistricts":  strs(configured),
		"successfulDistricts":  strs(successful),
		"failedDistricts":      strs(failedIn),
		"errors":               strs(errs),
		"processingDuration":   pm.ProcessingDurationMs,
		"source":               pm.Source,
		"dataAsOfDate":         pm.DataAsOfDate,
		"writeComplete":        complete,
		"writeFailedDistricts": strs(failed),
		"writerFence":          in.fence,
		"writerLockBackend":    in.backend,
		"writeStartedAt":       in.startedAt.UTC().Format(time.RFC3339Nano),
		"payloadHash":          in.payloadHash,
		"payloadMetadata":      verbatim,
	}
	if !finishedAt.IsZero() {
		m["writeFinishedAt"] = finishedAt.UTC().Format(time.RFC3339Nano)
	}
	if v, ok := rankingVersion(s.Rankings); ok {
		m["rankingVersion"] = v
	}
	pm.PutOptional(m)
	return m, nil
}

// manifest is the SnapshotManifest: one entry per district in input order.
func (in rootInput) manifest(status map[string]string, errMsg map[string]string, modified time.Time) map[string]any {
	s := in.snap
	entries := make([]any, 0, len(s.Payload.Districts))
	ok, bad := 0, 0
	for _, d := range s.Payload.Districts {
		st := status[d.DistrictID]
		if st == "" {
			st = entryPending
		}
		e := map[string]any{
			"districtId":   d.DistrictID,
			"fileName":     districtDocID(d.DistrictID),
			"status":       st,
			"fileSize":     int64(in.docSizes[d.DistrictID]),
			"contentHash":  in.hashes[d.DistrictID],
			"lastModified": modified.UTC().Format(time.RFC3339Nano),
		}
		switch st {
		case entrySuccess:
			ok++
		case entryFailed:
			bad++
			if msg := errMsg[d.DistrictID]; msg != "" {
				e["errorMessage"] = msg
			}
		}
		entries = append(entries, e)
	}
	m := map[string]any{
		"snapshotId":          s.SnapshotID,
		"createdAt":           s.CreatedAt,
		"districts":           entries,
		"totalDistricts":      int64(len(s.Payload.Districts)),
		"successfulDistricts": int64(ok),
		"failedDistricts":     int64(bad),
	}
	rk := map[string]any{"filename": "rankings", "size": int64(0), "status": "missing"}
	if s.Rankings != nil {
		rk["size"] = int64(model.FirestoreSize(s.Rankings))
		rk["status"] = "present"
	}
	m["allDistrictsRankings"] = rk
	return m
}

// rootDoc is the root document written before any district: status
// "writing", every manifest entry pending.
func (in rootInput) rootDoc() (map[string]any, error) {
	md, err := in.metadata(statusWriting, false, nil, time.Time{})
	if err != nil {
		return nil, err
	}
	doc := map[string]any{
		"metadata": md,
		"manifest": in.manifest(nil, nil, in.startedAt),
	}
	if in.snap.Rankings != nil {
		doc["rankings"] = in.snap.Rankings
	}
	if extra := inputExtra(in.snap); extra != nil {
		doc["inputExtra"] = extra
	}
	return doc, nil
}

// inputExtra keeps fields of the input that the layout has no place for.
func inputExtra(s *model.Snapshot) map[string]any {
	extra := map[string]any{}
	if len(s.Extra) > 0 {
		extra["snapshot"] = map[string]any(s.Extra)
	}
	if len(s.Payload.Extra) > 0 {
		extra["payload"] = map[string]any(s.Payload.Extra)
	}
	if len(extra) == 0 {
		return nil
	}
	return extra
}

func rankingVersion(r model.Object) (string, bool) {
	md, _ := r["metadata"].(map[string]any)
	v, ok := md["rankingVersion"].(string)
	return v, ok
}

func districtIDs(s *model.Snapshot) []string {
	ids := make([]string, len(s.Payload.Districts))
	for i, d := range s.Payload.Districts {
		ids[i] = d.DistrictID
	}
	return ids
}

// strs turns a string slice into the []any Firestore stores, never nil (an
// absent array and an empty one differ to the application's readers).
func strs(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// toObject converts a JSON-marshalable value into the canonical value tree.
func toObject(v any) (model.Object, error) {
	b, err := model.Marshal(v)
	if err != nil {
		return nil, err
	}
	var o model.Object
	if err := unmarshalCanonical(b, &o); err != nil {
		return nil, err
	}
	return o, nil
}

func unmarshalCanonical(b []byte, o *model.Object) error {
	obj, err := model.DecodeObject(bytesReader(b))
	if err != nil {
		return err
	}
	*o = obj
	return nil
}

// fromRoot rebuilds the input-format Snapshot from a root document and its
// district documents. Roots written by the TypeScript application have no
// payloadMetadata; their payload metadata is rebuilt the way its reader does.
func fromRoot(root map[string]any, districts map[string]map[string]any) (*model.Snapshot, error) {
	md, _ := root["metadata"].(map[string]any)
	if md == nil {
		return nil, fmt.Errorf("root document has no metadata")
	}
	s := map[string]any{
		"snapshot_id":         md["snapshotId"],
		"created_at":          md["createdAt"],
		"schema_version":      md["schemaVersion"],
		"calculation_version": md["calculationVersion"],
		"status":              md["status"],
		"errors":              orEmpty(md["errors"]),
	}
	pm, _ := md["payloadMetadata"].(map[string]any)
	if pm == nil {
		pm = legacyPayloadMetadata(md, len(districts))
	}
	payload := map[string]any{"metadata": pm}
	if extra, ok := root["inputExtra"].(map[string]any); ok {
		for k, v := range asMap(extra["snapshot"]) {
			s[k] = v
		}
		for k, v := range asMap(extra["payload"]) {
			payload[k] = v
		}
	}
	list := make([]any, 0, len(districts))
	for _, id := range manifestOrder(root, districts) {
		list = append(list, districts[id]["data"])
	}
	payload["districts"] = list
	s["payload"] = payload
	if r, ok := root["rankings"]; ok && r != nil {
		s["rankings"] = r
	}
	b, err := model.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encoding stored snapshot: %w", err)
	}
	return model.Decode(bytesReader(b))
}

// legacyPayloadMetadata mirrors the TypeScript reader for roots it wrote.
func legacyPayloadMetadata(md map[string]any, n int) map[string]any {
	pm := map[string]any{
		"source":               md["source"],
		"fetchedAt":            md["createdAt"],
		"dataAsOfDate":         md["dataAsOfDate"],
		"districtCount":        int64(n),
		"processingDurationMs": md["processingDuration"],
	}
	for _, k := range []string{"configuredDistricts", "successfulDistricts", "failedDistricts", "districtErrors", "isClosingPeriodData", "collectionDate", "logicalDate"} {
		if v, ok := md[k]; ok {
			pm[k] = v
		}
	}
	return pm
}

// manifestOrder lists the stored district ids in manifest order, then any
// district document the manifest does not name, sorted.
func manifestOrder(root map[string]any, districts map[string]map[string]any) []string {
	seen := map[string]bool{}
	var ids []string
	mf := asMap(root["manifest"])
	entries, _ := mf["districts"].([]any)
	for _, e := range entries {
		id, _ := asMap(e)["districtId"].(string)
		if _, ok := districts[id]; ok && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	var rest []string
	for id := range districts {
		if !seen[id] {
			rest = append(rest, id)
		}
	}
	sort.Strings(rest)
	return append(ids, rest...)
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func orEmpty(v any) any {
	if v == nil {
		return []any{}
	}
	return v
}
