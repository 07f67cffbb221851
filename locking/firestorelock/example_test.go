package firestorelock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
)

// Example runs a function while holding a fenced lock: Do acquires
// (waiting up to the retry policy's timeout), extends the lock every TTL/3,
// cancels fn's context if the lock is lost, and always releases.
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

	err = locking.Do(ctx, backend, "report:2026-11-20", func(ctx context.Context) error {
		// ctx ends if the lock is lost; pass the fence to every write the
		// lock guards, so storage can refuse a writer that lost it.
		return nil
	}, locking.WithTTL(30*time.Second), locking.OnReleaseError(func(err error, keyHash string) {
		log.Printf("release of lock %s failed (it expires with its TTL): %v", keyHash, err)
	}))
	switch {
	case errors.Is(err, locking.ErrAcquisitionTimeout):
		fmt.Println("someone else holds the lock")
	case errors.Is(err, locking.ErrLeaseLost):
		fmt.Println("lost the lock mid-way; the work may not have been exclusive")
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
