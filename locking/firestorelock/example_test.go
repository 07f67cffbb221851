package firestorelock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
)

// Example runs a function while holding a fenced lock: Do acquires
// (waiting up to the retry policy's timeout), extends the lock every TTL/3,
// cancels fn's context if the lock is lost, and always releases. fn stamps
// the lease's fence on what the lock guards, in a transaction that refuses
// to write over a newer holder's fence.
func Example() {
	ctx := context.Background()
	client, err := firestore.NewClient(ctx, "my-project") // FIRESTORE_EMULATOR_HOST for the emulator
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	backend, err := firestorelock.New(client) // collections "locks" and "fence_counters"
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()

	errFencedOut := errors.New("a newer lock holder has written the report")
	report := client.Collection("reports").Doc("2026-11-20")
	err = locking.Do(ctx, backend, "report:2026-11-20", func(ctx context.Context, l *locking.Lease) error {
		// ctx ends if the lock is lost. Should this holder have lost it
		// without noticing yet (a pause, a partition), the fence check
		// still keeps it from overwriting its successor.
		return client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			snap, err := tx.Get(report)
			if err != nil && status.Code(err) != codes.NotFound {
				return err
			}
			if snap != nil && snap.Exists() {
				if stored, _ := snap.Data()["fence"].(string); stored > l.Fence() { // fences compare as strings
					return errFencedOut
				}
			}
			return tx.Set(report, map[string]any{"body": "…", "fence": l.Fence()})
		})
	}, locking.WithTTL(30*time.Second), locking.OnReleaseError(func(err error, keyHash string) {
		log.Printf("release of lock %s failed (it expires with its TTL): %v", keyHash, err)
	}))
	switch {
	case errors.Is(err, locking.ErrAcquisitionTimeout):
		fmt.Println("someone else holds the lock")
	case errors.Is(err, errFencedOut), errors.Is(err, locking.ErrLeaseLost):
		fmt.Println("lost the lock mid-way; a newer holder took over")
	case err != nil:
		log.Fatal(err)
	}
}

// ExampleBackend_lowLevel uses the backend directly: a held Lease with a
// heartbeat, its fence, and Done for loss.
func ExampleBackend_lowLevel() {
	ctx := context.Background()
	client, err := firestore.NewClient(ctx, "my-project")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	backend, err := firestorelock.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()
	lease, err := locking.Acquire(ctx, backend, "snapshot:2026-11-20")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(context.Background())
	fmt.Println("fence", lease.Fence()) // 15 digits; compare as strings
	select {
	case <-lease.Done():
		log.Print(lease.Err()) // lost (ErrLeaseLost) or released
	default:
	}
}
