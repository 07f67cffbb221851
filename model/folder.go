package model

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFolder writes snap to dir as the application stores a snapshot in
// a per-district folder (LoadFS reads it back): metadata.json, one
// district_{id}.json per district (the stored envelope, data inside),
// all-districts-rankings.json when snap has rankings, and manifest.json
// last, with writeComplete: true, as the application's uploader writes it.
// dir is created if need be. It serves the demo, tests and benchmarks that
// need the folder form of a snapshot.
func WriteFolder(snap *Snapshot, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	pm := snap.Payload.Metadata
	ids := make([]any, 0, len(snap.Payload.Districts))
	entries := make([]any, 0, len(snap.Payload.Districts))
	for _, d := range snap.Payload.Districts {
		data, err := d.Data()
		if err != nil {
			return err
		}
		name := "district_" + d.DistrictID + ".json"
		doc := Object{"districtId": d.DistrictID, "districtName": "District " + d.DistrictID,
			"collectedAt": pm.FetchedAt, "status": "success", "data": data}
		n, err := writeJSON(filepath.Join(dir, name), doc)
		if err != nil {
			return err
		}
		ids = append(ids, d.DistrictID)
		entries = append(entries, Object{"districtId": d.DistrictID, "fileName": name, "status": "success",
			"fileSize": int64(n), "lastModified": snap.CreatedAt})
	}
	md := Object{"snapshotId": pm.DataAsOfDate, "createdAt": snap.CreatedAt, "schemaVersion": snap.SchemaVersion,
		"calculationVersion": snap.CalculationVersion, "status": snap.Status, "configuredDistricts": ids,
		"successfulDistricts": ids, "failedDistricts": []any{}, "errors": anyList(snap.Errors),
		"processingDuration": pm.ProcessingDurationMs, "source": pm.Source, "dataAsOfDate": pm.DataAsOfDate}
	if _, err := writeJSON(filepath.Join(dir, "metadata.json"), md); err != nil {
		return err
	}
	if snap.Rankings != nil {
		if _, err := writeJSON(filepath.Join(dir, "all-districts-rankings.json"), snap.Rankings); err != nil {
			return err
		}
	}
	manifest := Object{"snapshotId": pm.DataAsOfDate, "createdAt": snap.CreatedAt, "districts": entries,
		"totalDistricts": int64(len(entries)), "successfulDistricts": int64(len(entries)), "failedDistricts": int64(0),
		"writeComplete": true}
	_, err := writeJSON(filepath.Join(dir, "manifest.json"), manifest)
	return err
}

func writeJSON(path string, v any) (int, error) {
	b, err := Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return len(b), os.WriteFile(path, b, 0o644)
}
