package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// These examples need a Firestore emulator (FIRESTORE_EMULATOR_HOST), so
// they carry no Output comment, which would make `go test -short` (make
// test-short, which starts no emulator) run them: TestExamples runs each
// against the emulator and checks that it prints what its last comment
// says. Each uses a project of its own.

// newWriter connects to Firestore and guards each snapshot with a
// Firestore lock in the same database.
func newWriter(ctx context.Context, project string, opts ...snapshot.Option) (*firestore.Client, *snapshot.Writer) {
	client, err := firestore.NewClient(ctx, project)
	if err != nil {
		log.Fatal(err)
	}
	locks, err := firestorelock.New(client)
	if err != nil {
		log.Fatal(err)
	}
	w, err := snapshot.NewWriter(client, locks, opts...)
	if err != nil {
		log.Fatal(err)
	}
	return client, w
}

// Write a snapshot and tell its endings apart with one switch: nil means
// complete, ErrPartial that the manifest records what is missing.
func ExampleWriter_Write() {
	ctx := context.Background()
	client, w := newWriter(ctx, "example-write", snapshot.WithConcurrency(3))
	defer client.Close()
	defer w.Close()

	snap := model.Generate("2026-11-20", 132, 1) // or decode the job's input JSON
	res, err := w.Write(ctx, "2026-11-20", snap)
	switch {
	case err == nil:
		fmt.Printf("complete: %d districts in %d chunks\n", res.DistrictsWritten, res.Chunks)
	case errors.Is(err, snapshot.ErrPartial):
		// The manifest names the districts not written; Repair with the
		// same input writes exactly those.
		fmt.Printf("partial: %d districts not written\n", len(res.FailedDistricts))
	case errors.Is(err, snapshot.ErrLockHeld):
		fmt.Println("another writer holds this snapshot")
	case errors.Is(err, snapshot.ErrFencedOut):
		fmt.Println("a newer writer took the snapshot over")
	default:
		log.Fatal(err)
	}
	// Prints: complete: 132 districts in 3 chunks
}

// Read a snapshot back in the input format, and the state of every
// snapshot stored.
func ExampleReader_Get() {
	ctx := context.Background()
	client, w := newWriter(ctx, "example-read")
	defer client.Close()
	defer w.Close()
	in := model.Generate("2026-11-20", 60, 2)
	if _, err := w.Write(ctx, "2026-11-20", in); err != nil {
		log.Fatal(err)
	}

	r := snapshot.NewReader(client, snapshot.DefaultCollection)
	got, err := r.Get(ctx, "2026-11-20")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("identical to the input:", model.Equal(got, in))
	list, err := r.List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range list {
		fmt.Println(s.SnapshotID, s.State, s.Districts)
	}
	// Prints:
	// identical to the input: true
	// 2026-11-20 complete 60
}

// Repair completes a partial snapshot from the same input, writing only
// what the manifest does not record as written; a complete one is left
// alone.
func ExampleWriter_Repair() {
	ctx := context.Background()
	client, w := newWriter(ctx, "example-repair")
	defer client.Close()
	defer w.Close()
	in := model.Generate("2026-11-20", 60, 3)
	if _, err := w.Write(ctx, "2026-11-20", in); err != nil && !errors.Is(err, snapshot.ErrPartial) {
		log.Fatal(err)
	}

	res, err := w.Repair(ctx, "2026-11-20", in)
	switch {
	case errors.Is(err, snapshot.ErrMismatch):
		log.Fatal("this is not the input that was written: ", err)
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println("outcome:", res.Outcome)
	// Prints: outcome: skipped
}
