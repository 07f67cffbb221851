package backfill_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/backfill"
	"github.com/snapwriter/snapwriter/input"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/snapshot"
)

// Write the dates of November 2026 found in ./snapshots (or a gs:// folder,
// with a Loader whose Storage opens Cloud Storage), leaving those already
// complete in Firestore alone.
func ExampleRun() {
	ctx := context.Background()
	client, err := firestore.NewClient(ctx, "my-project")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	locker, err := firestorelock.New(client)
	if err != nil {
		log.Fatal(err)
	}
	w, err := snapshot.NewWriter(client, locker, snapshot.WithSkipComplete(true))
	if err != nil {
		log.Fatal(err)
	}
	r := snapshot.NewReader(client, "")
	loader := &input.Loader{}

	all, err := backfill.List(ctx, loader, "./snapshots")
	if err != nil {
		log.Fatal(err)
	}
	inputs := backfill.Select(all, "2026-11-01", "2026-11-30", backfill.Shard{Index: 0, Count: 1})
	complete, err := backfill.Completed(ctx, r)
	if err != nil {
		log.Fatal(err)
	}
	// Refuse every bad input before the first write.
	if err := backfill.Check(ctx, loader, inputs, complete); err != nil {
		log.Fatal(err)
	}
	sum := backfill.Run(ctx, inputs, backfill.Options{
		Writer: w, Loader: loader, Reader: r, SkipComplete: true, ReadTimeout: 30 * time.Second, Complete: complete,
	})
	for _, d := range sum.Dates {
		fmt.Println(d.Date, d.Outcome, d.Err)
	}
	if worst, ok := sum.Worst(); ok && worst.Outcome.Severity() > 0 {
		log.Fatalf("%d partial, %d failed, %d not started; worst: %s %s", sum.Partial, sum.Failed, sum.NotStarted, worst.Date, worst.Outcome)
	}
}
