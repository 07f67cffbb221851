package model

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/snapwriter/snapwriter/internal/safego"

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
	p, err := validate(s, id, true)
	return p.Districts, err
}

// PrepareWrite is Prepare with the rest of what validating s found that a
// writer needs: the estimate of its root document that validation held to
// Firestore's limits, and its rankings' size. A writer takes them from
// here so that it estimates the root, and sizes the rankings, only once.
func PrepareWrite(s *Snapshot, id string) (Prepared, error) {
	return validate(s, id, true)
}

// Prepared is what PrepareWrite found of a valid snapshot.
type Prepared struct {
	// Districts holds every district's DataSummary, in input order.
	Districts []DataSummary
	// Root is the estimate of the root document, as RootEstimate gives it.
	Root RootSize
	// RankingsSize is the rankings' FirestoreSize, 0 when there are none.
	RankingsSize int
}

// RootSize is an estimate from above of a snapshot's root document as it
// is first written (RootEstimate): Inline with its manifest entries, Paged
// with them in manifest pages, Entries what the entries alone take.
type RootSize struct {
	Inline, Paged, Entries int
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
		g.Go(safego.Func(func() error {
			dw := &walks[i]
			// Paths are walked below "" and the district's path put
			// before them only for a problem, so that the districts
			// without any format none.
			add := func(path, format string, args ...any) {
				dw.problems = append(dw.problems, Problem{Path: districtAt(i) + path, Message: fmt.Sprintf(format, args...)})
			}
			if !hash {
				dw.size = checkValue(ds[i].data, "", 1, false, add)
				return nil
			}
			sc := scratchPool.Get().(*summaryScratch)
			defer scratchPool.Put(sc)
			dw.sum, dw.size, dw.err = summarizeData(ds[i].data, "", add, sc)
			return nil
		}))
	}
	safego.Repanic(g.Wait()) // the districts report through walks; a panic is raised again here, in the caller
	return walks
}

// districtAt is the path of the district at index i.
func districtAt(i int) string { return fmt.Sprintf("$.payload.districts[%d]", i) }

func validate(s *Snapshot, id string, hash bool) (Prepared, error) {
	var p problems
	if s == nil {
		p.add("$", "no snapshot")
		return Prepared{}, p.err()
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
		at := func(below string) string { return districtAt(i) + below } // formatted for a problem only
		switch {
		case d.DistrictID == "":
			p.add(at(".districtId"), "missing")
		case !ValidDistrictID(d.DistrictID):
			p.add(at(".districtId"), "%q is not a district id: want 1–%d letters or digits", d.DistrictID, maxDistrictIDLen)
		default:
			if j, dup := seen[d.DistrictID]; dup {
				p.add(at(".districtId"), "duplicate district id %q (also at districts[%d])", d.DistrictID, j)
			} else {
				seen[d.DistrictID] = i
			}
		}
		if head := d.head(); head != nil {
			if v, _ := head["districtId"].(string); v != d.DistrictID {
				p.add(at(".districtId"), "DistrictID %q disagrees with the data's districtId %q", d.DistrictID, v)
			}
			if v, _ := head["asOfDate"].(string); v != d.AsOfDate {
				p.add(at(".asOfDate"), "AsOfDate %q disagrees with the data's asOfDate %q", d.AsOfDate, v)
			}
		}
		if d.AsOfDate != "" && !ValidDate(d.AsOfDate) {
			p.add(at(".asOfDate"), "%q is not a real YYYY-MM-DD date", d.AsOfDate)
		}
		var size int
		if d.Lazy() {
			// Checked as it was read, the data left in the file.
			for _, lp := range d.lazy.problems {
				p.add(at(lp.Path), "%s", lp.Message)
			}
			size = d.lazy.summary.FirestoreSize
		} else {
			p.list = append(p.list, walks[i].problems...)
			size = walks[i].size
		}
		if n := size + len("data") + 1 + DistrictEnvelopeBudget; n > MaxDocumentBytes {
			p.add(at(""), "the district document would be %d bytes, over Firestore's %d-byte (1 MiB) limit", n, MaxDocumentBytes)
		}
	}
	checkValue(s.Extra, "$", 1, false, p.add)
	checkValue(s.Payload.Extra, "$.payload", 2, false, p.add)
	checkValue(md.Extra, "$.payload.metadata", 3, false, p.add)
	checkValue(md.DistrictErrors, "$.payload.metadata.districtErrors", 3, false, p.add)
	rankings := 0
	if s.Rankings != nil {
		// Sized by the walk that checks them, for the estimate below and
		// the manifest's rankings entry.
		rankings = checkFirestoreSize(s.Rankings, "$.rankings", 1, p.add)
	}
	// A manifest too large for the root moves to manifest pages (see
	// RootEstimate): only a root too large without its entries is refused.
	parts, root := rootDocParts(s, rankings)
	if n := root.Paged; n > MaxDocumentBytes {
		// Name the culprits: a 200 MB unknown field, not "the rankings".
		var largest []string
		for _, part := range parts[:min(3, len(parts))] {
			largest = append(largest, fmt.Sprintf("%s (from %s) %d bytes", part.field, part.from, part.size))
		}
		p.add("$", "the snapshot's root document would be about %d bytes even with its manifest entries in manifest pages, over Firestore's %d-byte (1 MiB) limit; its largest fields: %s",
			n, MaxDocumentBytes, strings.Join(largest, ", "))
	}
	if entries := root.Entries; entries > MaxManifestEntriesBytes {
		p.add("$.payload.districts", "%d districts need about %d bytes of manifest entries, over the %d bytes written with the root in one transaction (Firestore's 10 MiB commit limit)",
			len(s.Payload.Districts), entries, MaxManifestEntriesBytes)
	}
	if err := p.err(); err != nil || !hash {
		return Prepared{}, err
	}
	sums := make([]DataSummary, len(s.Payload.Districts))
	for i, d := range s.Payload.Districts {
		if d.Lazy() {
			sums[i] = d.lazy.summary
			continue
		}
		if err := walks[i].err; err != nil {
			return Prepared{}, fmt.Errorf("district %s: %w", d.DistrictID, err)
		}
		sums[i] = walks[i].sum
	}
	return Prepared{Districts: sums, Root: root, RankingsSize: rankings}, nil
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
// PrepareWrite gives the same figures from its validation of s.
func RootEstimate(s *Snapshot) (inline, paged, entries int) {
	rankings := 0
	if s.Rankings != nil {
		rankings = FirestoreSize(s.Rankings)
	}
	_, r := rootDocParts(s, rankings)
	return r.Inline, r.Paged, r.Entries
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
// in its paged form, largest first, and returns its RootSize: the inline
// form differs only by the manifest's entries. metadata holds the
// application's fields (the payload metadata's known fields a second time),
// the id lists, the errors and payloadMetadata, the input's
// payload.metadata verbatim; manifest (paged) only its counts and the
// pages' pointer; rankings the input's rankings verbatim, whose
// FirestoreSize is rankings; inputExtra the input's unknown top-level and
// payload fields.
func rootDocParts(s *Snapshot, rankings int) ([]rootPart, RootSize) {
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
	parts := []rootPart{
		{"metadata", "$.payload.metadata and $.errors", meta},
		{"manifest", "$.payload.districts, in manifest pages", 1 << 10},
	}
	if s.Rankings != nil {
		parts = append(parts, rootPart{"rankings", "$.rankings", len("rankings") + 1 + rankings})
	}
	for _, x := range []struct {
		field, from string
		extra       Object
	}{{"inputExtra.snapshot", "$", s.Extra}, {"inputExtra.payload", "$.payload", s.Payload.Extra}} {
		for k, v := range x.extra {
			parts = append(parts, rootPart{childPath(x.field, k), childPath(x.from, k), len(k) + 1 + FirestoreSize(v)})
		}
	}
	paged := 1 << 10 // the document's name, inputExtra's own keys
	for _, part := range parts {
		paged += part.size
	}
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].size != parts[j].size {
			return parts[i].size > parts[j].size
		}
		return parts[i].field < parts[j].field
	})
	entries := manifestEntriesSize(s)
	return parts, RootSize{Inline: paged + entries, Paged: paged, Entries: entries}
}
