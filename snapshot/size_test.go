package snapshot

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// maxDocBytes is Firestore's limit on a document.
const maxDocBytes = 1 << 20

// Validation's root estimate is from above: any snapshot it accepts has a
// root document (with a content hash per manifest entry) that Firestore
// takes, so no write fails at its root for size after taking the lock —
// the root as written first, its largest: every entry "not written yet"
// with its errorMessage, and the failed lists naming every district. The
// manifest stays inline while the estimate is under the threshold
// (3,900 districts of model.Generate), and moves to pages beyond (4,100);
// then the root and every page fit, up to 20,000 districts and beyond.
func TestAcceptedRootFits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := &Writer{cfg: config{pageThreshold: layout.DefaultPageThreshold, pageSize: layout.DefaultPageSize}}
	for _, tc := range []struct {
		n     int
		paged bool
	}{{3900, false}, {4100, true}, {20000, true}} {
		s := model.Generate(day, min(tc.n, 5500), 1)
		if tc.n > 5500 {
			s = smallSnapshot(day, tc.n)
		}
		if err := model.Validate(s, day); err != nil {
			t.Fatalf("%d districts: Validate = %v", tc.n, err)
		}
		f := buildRootForms(t, w, s)
		if f.in.Paged() != tc.paged {
			t.Errorf("%d districts: paged %v, want %v", tc.n, f.in.Paged(), tc.paged)
		}
		docs := map[string]any{day: f.start, day + "-failed": f.failed}
		for i, p := range f.startPages {
			docs[day+"-page-"+layout.PageID(i)] = p
		}
		for i, p := range f.failedPages {
			docs[day+"-failed-page-"+layout.PageID(i)] = p
		}
		largestPage, rootSize, failedSize := 0, 0, 0
		for name, doc := range docs {
			// Measured on what Firestore stores: the emulator may refuse
			// the document outright, else its stored fields are counted.
			ref := e.clean.Collection("sizes").Doc(name)
			size := maxDocBytes + 1
			if _, err := ref.Set(ctx, doc); err == nil {
				snap, err := ref.Get(ctx)
				if err != nil {
					t.Fatal(err)
				}
				// The document's name counts too.
				size = model.FirestoreSize(snap.Data()) + len("projects/p/databases/(default)/documents/snapshots/"+day+"/manifest/00000") + 16
			} else if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("%d districts: %v", tc.n, err)
			}
			if size > maxDocBytes {
				t.Errorf("%d districts: %s is %d bytes, over 1 MiB", tc.n, name, size)
			}
			switch {
			case strings.Contains(name, "-page-"):
				largestPage = max(largestPage, size)
			case name == day:
				rootSize = size
			case name == day+"-failed":
				failedSize = size
			}
		}
		t.Logf("%d districts: root %d bytes (%d with every district failed), %d pages, the largest %d bytes", tc.n, rootSize, failedSize, len(f.startPages), largestPage)
	}
}

// rootForms are a snapshot's root document and manifest pages in two
// states: as the write's start writes them, and as the finish of a write
// whose every district failed records them, each entry with a long error
// (a lost lease's) — as large as a root and its pages get.
type rootForms struct {
	in                      rootInput
	start, failed           layout.Root
	startPages, failedPages []layout.Page
}

// buildRootForms builds s's rootForms as w would write them (w's page
// threshold and size decide the manifest's form).
func buildRootForms(t *testing.T, w *Writer, s *model.Snapshot) rootForms {
	t.Helper()
	in := rootInput{Input: layout.Input{ID: day, Snap: s, Fence: "000000000000001", Backend: "firestore", StartedAt: time.Now(),
		DocSizes: map[string]int{}, Hashes: map[string]string{}}}
	for _, d := range s.Payload.Districts {
		doc := layout.DistrictDoc(s, d, memData(d), in.Fence)
		h, _, err := layout.DistrictHashes(doc)
		if err != nil {
			t.Fatal(err)
		}
		in.DocSizes[d.DistrictID], in.Hashes[d.DistrictID] = model.FirestoreSize(doc), h
	}
	var err error
	if in.PayloadHash, err = layout.PayloadHash(s); err != nil {
		t.Fatal(err)
	}
	in.RootEstimate, _, _ = model.RootEstimate(s)
	if s.Rankings != nil {
		in.RankingsSize = model.FirestoreSize(s.Rankings)
	}
	w.paginate(&in)
	f := rootForms{in: in}
	if f.start, f.startPages, err = in.RootDoc(); err != nil {
		t.Fatal(err)
	}
	worst := layout.State{Status: layout.StatusPartial, Entries: map[string]string{}, Msgs: map[string]string{},
		Modified: time.Now(), FinishedAt: time.Now()}
	for _, d := range s.Payload.Districts {
		worst.Entries[d.DistrictID] = layout.EntryFailed
		worst.Msgs[d.DistrictID] = "not written (" + strings.Repeat("rpc error: code = Canceled (lease lost) ", 10) + ")"
	}
	md, err := in.Metadata(worst)
	if err != nil {
		t.Fatal(err)
	}
	mf, pages := in.Split(in.Manifest(worst))
	f.failed = layout.Root{Metadata: &md, Manifest: mf, InputExtra: layout.InputExtra(s), Rankings: f.start.Rankings}
	f.failedPages = pages
	return f
}
