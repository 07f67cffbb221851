package model

import (
	"fmt"
	"time"
)

// Statuses the application gives a scrape.
var snapshotStatuses = map[string]bool{"success": true, "partial": true, "failed": true}

// ValidDate reports whether s is a real calendar date in YYYY-MM-DD form.
func ValidDate(s string) bool {
	if !dateRe.MatchString(s) {
		return false
	}
	_, err := time.Parse(time.DateOnly, s)
	return err == nil
}

// ValidDistrictID reports whether id can name a district: letters and digits
// only (it becomes part of a Firestore document id), at most 64 characters.
func ValidDistrictID(id string) bool {
	return len(id) <= maxDistrictIDLen && districtIDRe.MatchString(id)
}

// Validate checks everything that would make a write of s under id fail or
// store something other than s, and reports every problem at once as a
// *ValidationError (errors.Is(err, ErrInvalid)). It writes nothing and is
// cheap enough to run before taking the lock.
func Validate(s *Snapshot, id string) error {
	var p problems
	if s == nil {
		p.add("$", "no snapshot")
		return p.err()
	}
	switch {
	case id == "":
		p.add("$.payload.metadata.dataAsOfDate", "missing: the snapshot id comes from --date or payload.metadata.dataAsOfDate")
	case !ValidDate(id):
		p.add("snapshot id", "%q is not a real YYYY-MM-DD date", id)
	}
	md := s.Payload.Metadata
	if md.DataAsOfDate != "" && !ValidDate(md.DataAsOfDate) {
		p.add("$.payload.metadata.dataAsOfDate", "%q is not a real YYYY-MM-DD date", md.DataAsOfDate)
	}
	for _, f := range []struct{ path, v string }{
		{"$.payload.metadata.collectionDate", md.CollectionDate},
		{"$.payload.metadata.logicalDate", md.LogicalDate},
	} {
		if f.v != "" && !ValidDate(f.v) {
			p.add(f.path, "%q is not a real YYYY-MM-DD date", f.v)
		}
	}
	if s.Status != "" && !snapshotStatuses[s.Status] {
		p.add("$.status", "%q is not one of success, partial, failed", s.Status)
	}
	if md.DistrictCount < 0 {
		p.add("$.payload.metadata.districtCount", "%d is negative", md.DistrictCount)
	}
	if md.ProcessingDurationMs < 0 {
		p.add("$.payload.metadata.processingDurationMs", "%d is negative", md.ProcessingDurationMs)
	}

	if len(s.Payload.Districts) == 0 {
		p.add("$.payload.districts", "no districts: a snapshot needs at least one")
	}
	seen := make(map[string]int, len(s.Payload.Districts))
	for i, d := range s.Payload.Districts {
		path := fmt.Sprintf("$.payload.districts[%d]", i)
		switch {
		case d.DistrictID == "":
			p.add(path+".districtId", "missing")
		case !ValidDistrictID(d.DistrictID):
			p.add(path+".districtId", "%q is not a district id: want 1–%d letters or digits", d.DistrictID, maxDistrictIDLen)
		default:
			if j, dup := seen[d.DistrictID]; dup {
				p.add(path+".districtId", "duplicate district id %q (also at districts[%d])", d.DistrictID, j)
			} else {
				seen[d.DistrictID] = i
			}
		}
		if d.Data != nil {
			if v, _ := d.Data["districtId"].(string); v != d.DistrictID {
				p.add(path+".districtId", "DistrictID %q disagrees with the data's districtId %q", d.DistrictID, v)
			}
			if v, _ := d.Data["asOfDate"].(string); v != d.AsOfDate {
				p.add(path+".asOfDate", "AsOfDate %q disagrees with the data's asOfDate %q", d.AsOfDate, v)
			}
		}
		if d.AsOfDate != "" && !ValidDate(d.AsOfDate) {
			p.add(path+".asOfDate", "%q is not a real YYYY-MM-DD date", d.AsOfDate)
		}
		size := checkValue(map[string]any(d.Data), path, 1, false, p.add)
		if n := size + len("data") + 1 + DistrictEnvelopeBudget; n > MaxDocumentBytes {
			p.add(path, "the district document would be %d bytes, over Firestore's %d-byte (1 MiB) limit", n, MaxDocumentBytes)
		}
	}
	checkValue(map[string]any(s.Extra), "$", 1, false, p.add)
	checkValue(map[string]any(s.Payload.Extra), "$.payload", 2, false, p.add)
	checkValue(map[string]any(md.Extra), "$.payload.metadata", 3, false, p.add)
	checkValue(md.DistrictErrors, "$.payload.metadata.districtErrors", 3, false, p.add)
	if s.Rankings != nil {
		checkValue(map[string]any(s.Rankings), "$.rankings", 1, false, p.add)
	}
	if n := rootDocEstimate(s); n > MaxDocumentBytes {
		p.add("$", "the snapshot's root document (metadata, manifest of %d districts, rankings) would be about %d bytes, over Firestore's %d-byte (1 MiB) limit",
			len(s.Payload.Districts), n, MaxDocumentBytes)
	}
	return p.err()
}

// rootDocEstimate bounds the root document from above: the payload metadata
// twice (the application's fields and the verbatim copy), the input's extra
// fields, the rankings, the id lists, and a manifest entry per district.
func rootDocEstimate(s *Snapshot) int {
	n := 8 << 10 // fixed fields, names, overhead
	n += 2 * FirestoreSize(s.Payload.Metadata.tree())
	n += FirestoreSize(map[string]any(s.Extra)) + FirestoreSize(map[string]any(s.Payload.Extra))
	n += FirestoreSize(map[string]any(s.Rankings))
	for _, e := range s.Errors {
		n += len(e) + 1
	}
	for _, d := range s.Payload.Districts {
		// configured + successful lists, and the manifest entry's keys,
		// id, file name, status, size and timestamp.
		n += 2*(len(d.DistrictID)+1) + 125 + 2*len(d.DistrictID)
	}
	return n
}
