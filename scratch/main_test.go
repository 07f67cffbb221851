package scratch

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
)

func TestStall(t *testing.T) {
	ctx := context.Background()
	c1, _ := firestore.NewClient(ctx, "stall")
	c2, _ := firestore.NewClient(ctx, "stall")
	ref := c1.Collection("locks").Doc("k")
	if _, err := ref.Set(ctx, map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	held := make(chan struct{})
	go c1.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if _, err := tx.Get(ref); err != nil {
			return err
		}
		close(held)
		select {} // never commits
	})
	<-held
	t0 := time.Now()
	ref2 := c2.Collection("locks").Doc("k")
	attempts := 0
	err := c2.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		attempts++
		t.Logf("attempt %d at %.1fs", attempts, time.Since(t0).Seconds())
		if _, err := tx.Get(ref2); err != nil {
			t.Logf("get err at %.1fs: %v", time.Since(t0).Seconds(), err)
			return err
		}
		return tx.Set(ref2, map[string]any{"v": 2})
	}, firestore.MaxAttempts(10))
	t.Logf("txn2 err after %.1fs (%d attempts): %v", time.Since(t0).Seconds(), attempts, err)
	// plain read
	t1 := time.Now()
	_, err = ref2.Get(ctx)
	t.Logf("plain get %.1fs %v", time.Since(t1).Seconds(), err)
}
