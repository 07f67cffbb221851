package snapshot

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/model"
)

// maxDocBytes is Firestore's limit on a document.
const maxDocBytes = 1 << 20

// Validation's root estimate is from above: any snapshot it accepts has a
// root document (with a content hash per manifest entry) that Firestore
// takes, so no write fails at its root for size after taking the lock —
// the root as written first, its largest: every entry "not written yet"
// with its errorMessage, and the failed lists naming every district.
// Near the limit: 5,200 districts are accepted, 5,500 (over 1 MiB) not.
func TestAcceptedRootFits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for _, tc := range []struct {
		n      int
		accept bool
	}{{5200, true}, {5500, false}} {
		s := model.Generate(day, tc.n, 1)
		err := model.Validate(s, day)
		if (err == nil) != tc.accept {
			t.Fatalf("%d districts: Validate = %v, want accepted %v", tc.n, err, tc.accept)
		}
		in := rootInput{id: day, snap: s, fence: "000000000000001", backend: "firestore", startedAt: time.Now(),
			docSizes: map[string]int{}, hashes: map[string]string{}}
		for _, d := range s.Payload.Districts {
			doc := districtDoc(s, d, d.Data, in.fence)
			h, _, err := districtHashes(doc)
			if err != nil {
				t.Fatal(err)
			}
			in.docSizes[d.DistrictID], in.hashes[d.DistrictID] = model.FirestoreSize(doc), h
		}
		if in.payloadHash, err = payloadHash(s); err != nil {
			t.Fatal(err)
		}
		root, err := in.rootDoc()
		if err != nil {
			t.Fatal(err)
		}
		// Measured on what Firestore stores: the emulator may refuse the
		// document outright, else its stored fields are counted.
		ref := e.clean.Collection("sizes").Doc(day)
		size := maxDocBytes + 1
		if _, err := ref.Set(ctx, root); err == nil {
			snap, err := ref.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// The document's name counts too.
			size = model.FirestoreSize(snap.Data()) + len("projects/p/databases/(default)/documents/sizes/"+day) + 16
		} else if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%d districts: %v", tc.n, err)
		}
		if fits := size <= maxDocBytes; fits != tc.accept {
			t.Errorf("%d districts: root %d bytes (fits %v), accepted %v", tc.n, size, fits, tc.accept)
		}
	}
}
