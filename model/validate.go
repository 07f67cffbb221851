package model

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/snapwriter/snapwriter/internal/walkcount"
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
	_, err := validate(s, id, false)
	return err
}

// Prepare validates s as Validate does and returns every district's
// DataSummary, in input order: all that a writer needs of the districts'
// data before it writes them. The summaries come from the walk that checks
// the data — made when the input was read, for a district read lazily —
// so that a district's data is walked once, not again to hash and size it.
func Prepare(s *Snapshot, id string) ([]DataSummary, error) {
	return validate(s, id, true)
}

// districtWalk is what walking a district's data in memory found: its
// problems (paths from the snapshot's root), its size as checked, and,
// when hashed, its summary or why it has none.
type districtWalk struct {
	problems []Problem
	size     int
	sum      DataSummary
	err      error
}

// walkDistricts walks the data of s's districts held in memory, hashing
// it when hash is set, on up to GOMAXPROCS goroutines; each district's
// findings go to its own slot, so they are what one pass finds.
func walkDistricts(s *Snapshot, hash bool) []districtWalk {
	ds := s.Payload.Districts
	walks := make([]districtWalk, len(ds))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range ds {
		if ds[i].Lazy() {
			continue
		}
		g.Go(func() error {
			dw := &walks[i]
			path := fmt.Sprintf("$.payload.districts[%d]", i)
			add := func(path, format string, args ...any) {
				dw.problems = append(dw.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
			}
			if !hash {
				dw.size = checkValue(ds[i].data, path, 1, false, add)
				return nil
			}
			sc := scratchPool.Get().(*summaryScratch)
			defer scratchPool.Put(sc)
			dw.sum, dw.size, dw.err = summarizeData(ds[i].data, path, add, sc)
			return nil
		})
	}
	_ = g.Wait() // the districts report through walks
	return walks
}

func validate(s *Snapshot, id string, hash bool) ([]DataSummary, error) {
	var p problems
	if s == nil {
		p.add("$", "no snapshot")
		return nil, p.err()
	}
	switch {
	case id == "":
		p.add("$.payload.metadata.dataAsOfDate", "missing, and no snapshot id was given")
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
	walks := walkDistricts(s, hash)
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
		if head := d.head(); head != nil {
			if v, _ := head["districtId"].(string); v != d.DistrictID {
				p.add(path+".districtId", "DistrictID %q disagrees with the data's districtId %q", d.DistrictID, v)
			}
			if v, _ := head["asOfDate"].(string); v != d.AsOfDate {
				p.add(path+".asOfDate", "AsOfDate %q disagrees with the data's asOfDate %q", d.AsOfDate, v)
			}
		}
		if d.AsOfDate != "" && !ValidDate(d.AsOfDate) {
			p.add(path+".asOfDate", "%q is not a real YYYY-MM-DD date", d.AsOfDate)
		}
		var size int
		if d.Lazy() {
			// Checked as it was read, the data left in the file.
			for _, lp := range d.lazy.problems {
				p.add(path+lp.Path, "%s", lp.Message)
			}
			size = d.lazy.summary.FirestoreSize
		} else {
			p.list = append(p.list, walks[i].problems...)
			size = walks[i].size
		}
		if n := size + len("data") + 1 + DistrictEnvelopeBudget; n > MaxDocumentBytes {
			p.add(path, "the district document would be %d bytes, over Firestore's %d-byte (1 MiB) limit", n, MaxDocumentBytes)
		}
	}
	checkValue(s.Extra, "$", 1, false, p.add)
	checkValue(s.Payload.Extra, "$.payload", 2, false, p.add)
	checkValue(md.Extra, "$.payload.metadata", 3, false, p.add)
	checkValue(md.DistrictErrors, "$.payload.metadata.districtErrors", 3, false, p.add)
	if s.Rankings != nil {
		checkValue(s.Rankings, "$.rankings", 1, false, p.add)
	}
	// A manifest too large for the root moves to manifest pages (see
	// RootEstimate): only a root too large without its entries is refused.
	if parts, n := rootDocParts(s, true); n > MaxDocumentBytes {
		// Name the culprits: a 200 MB unknown field, not "the rankings".
		var largest []string
		for _, part := range parts[:min(3, len(parts))] {
			largest = append(largest, fmt.Sprintf("%s (from %s) %d bytes", part.field, part.from, part.size))
		}
		p.add("$", "the snapshot's root document would be about %d bytes even with its manifest entries in manifest pages, over Firestore's %d-byte (1 MiB) limit; its largest fields: %s",
			n, MaxDocumentBytes, strings.Join(largest, ", "))
	}
	if _, _, entries := RootEstimate(s); entries > MaxManifestEntriesBytes {
		p.add("$.payload.districts", "%d districts need about %d bytes of manifest entries, over the %d bytes written with the root in one transaction (Firestore's 10 MiB commit limit)",
			len(s.Payload.Districts), entries, MaxManifestEntriesBytes)
	}
	if err := p.err(); err != nil || !hash {
		return nil, err
	}
	sums := make([]DataSummary, len(s.Payload.Districts))
	for i, d := range s.Payload.Districts {
		if d.Lazy() {
			sums[i] = d.lazy.summary
			continue
		}
		if err := walks[i].err; err != nil {
			return nil, fmt.Errorf("district %s: %w", d.DistrictID, err)
		}
		sums[i] = walks[i].sum
	}
	return sums, nil
}

// rootPart is one top-level field of the root document as it would be
// stored (or one member of its inputExtra), where in the input it comes
// from, and its estimated size.
type rootPart struct {
	field, from string
	size        int
}

// RootEstimate estimates from above the snapshot's root document as it is
// first written (every entry "not written yet"): inline with its manifest
// entries, and paged, with the entries in manifest pages; entries is what
// the entries alone take. A writer keeps them inline while that fits.
func RootEstimate(s *Snapshot) (inline, paged, entries int) {
	_, inline = rootDocParts(s, false)
	_, paged = rootDocParts(s, true)
	return inline, paged, manifestEntriesSize(s)
}

// MaxEntryMessageBytes bounds a manifest entry's errorMessage, so that
// the root estimate holds for a manifest whose every district failed.
const MaxEntryMessageBytes = 64

// manifestEntriesSize estimates the manifest entries of s from above: per
// district its keys, id, file name, status, size, timestamp
// (milliseconds), content hash (35 bytes: "contentHash" and 22
// characters) and errorMessage (13 bytes of key and at most
// MaxEntryMessageBytes: every district may have failed) — 213 bytes and
// the id twice — with a few to spare.
func manifestEntriesSize(s *Snapshot) int {
	n := 0
	for _, d := range s.Payload.Districts {
		n += 217 + 2*len(d.DistrictID)
	}
	return n
}

// rootDocParts estimates the root document from above, field by field,
// largest first, and returns the total. metadata holds the application's
// fields (the payload metadata's known fields a second time), the id lists,
// the errors and payloadMetadata, the input's payload.metadata verbatim;
// manifest an entry per district, or with paged only its counts and the
// pages' pointer; rankings the input's rankings verbatim; inputExtra the
// input's unknown top-level and payload fields.
func rootDocParts(s *Snapshot, paged bool) ([]rootPart, int) {
	walkcount.Add(walkcount.RootEstimate)
	md := s.Payload.Metadata
	meta := 6 << 10 // fixed fields, names, overhead
	meta += 2*FirestoreSize(md.tree()) - FirestoreSize(md.Extra)
	for _, e := range s.Errors {
		meta += len(e) + 1
	}
	for _, d := range s.Payload.Districts {
		// The configured list, and two of successful, failed and
		// writeFailed (a district is successful or not).
		meta += 3 * (len(d.DistrictID) + 1)
	}
	manifest, from := 1<<10, "$.payload.districts, in manifest pages"
	if !paged {
		manifest += manifestEntriesSize(s)
		from = fmt.Sprintf("$.payload.districts, %d entries", len(s.Payload.Districts))
	}
	parts := []rootPart{
		{"metadata", "$.payload.metadata and $.errors", meta},
		{"manifest", from, manifest},
	}
	if s.Rankings != nil {
		parts = append(parts, rootPart{"rankings", "$.rankings", len("rankings") + 1 + FirestoreSize(s.Rankings)})
	}
	for _, x := range []struct {
		field, from string
		extra       Object
	}{{"inputExtra.snapshot", "$", s.Extra}, {"inputExtra.payload", "$.payload", s.Payload.Extra}} {
		for k, v := range x.extra {
			parts = append(parts, rootPart{childPath(x.field, k), childPath(x.from, k), len(k) + 1 + FirestoreSize(v)})
		}
	}
	total := 1 << 10 // the document's name, inputExtra's own keys
	for _, part := range parts {
		total += part.size
	}
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].size != parts[j].size {
			return parts[i].size > parts[j].size
		}
		return parts[i].field < parts[j].field
	})
	return parts, total
}
