package firestorelock

import (
	"context"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/locktest"
)

// conformanceBackend is the Firestore backend with a record count, so the
// suite can check that rejected operations and lookups write nothing.
type conformanceBackend struct {
	*Backend
	colls []*firestore.CollectionRef
}

// CountRecords counts the lock documents and fence counters.
func (b conformanceBackend) CountRecords(ctx context.Context) (int, error) {
	n := 0
	for _, c := range b.colls {
		docs, err := c.Documents(ctx).GetAll()
		if err != nil {
			return 0, err
		}
		n += len(docs)
	}
	return n, nil
}

// The Firestore backend passes the backend-neutral conformance suite, each
// subtest on a fresh emulator project with non-default collections.
func TestConformance(t *testing.T) {
	t.Parallel()
	locktest.Run(t, func(t *testing.T) locking.Backend {
		const locks, fences = "conformance_locks", "conformance_fences"
		c := emu.TestClient(t)
		b, err := New(c, WithCollections(locks, fences))
		if err != nil {
			t.Fatal(err)
		}
		return conformanceBackend{Backend: b, colls: []*firestore.CollectionRef{c.Collection(locks), c.Collection(fences)}}
	})
}

// The backend whose transactions run on the Firestore API
// (WithAPIClient) passes the same suite.
func TestConformanceOnAPI(t *testing.T) {
	t.Parallel()
	locktest.Run(t, func(t *testing.T) locking.Backend {
		const locks, fences = "conformance_locks", "conformance_fences"
		c := emu.TestClient(t)
		b, err := New(c, WithCollections(locks, fences), WithAPIClient(emu.TestAPIClient(t)))
		if err != nil {
			t.Fatal(err)
		}
		return conformanceBackend{Backend: b, colls: []*firestore.CollectionRef{c.Collection(locks), c.Collection(fences)}}
	})
}
