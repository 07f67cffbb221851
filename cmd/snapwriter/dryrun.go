package main

import (
	"context"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/backfill"
	"github.com/snapwriter/snapwriter/input"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// dryRunUsage is the --dry-run flag's usage on write, repair and backfill.
const dryRunUsage = "validate the input and print what the command would do (districts, chunks, manifest form, root size, lock key) without writing anything or taking a lock"

// planner is the snapshot.Planner of the writes the flags describe: the
// writer's options (writeOptions, as newWriter's but for the API client),
// with no lock backend opened (snapshot.NewPlanner).
func (a *app) planner(client *firestore.Client, f writeFlags, extra ...snapshot.Option) (*snapshot.Planner, error) {
	p, err := snapshot.NewPlanner(client, f.lock.backend, a.writeOptions(f, extra...)...)
	if err != nil {
		return nil, usage(err)
	}
	return p, nil
}

// dryRun is writeOp's --dry-run: it prints r.plan's plan of snap, id,
// instead of running r.op.
func (a *app) dryRun(ctx context.Context, client *firestore.Client, f writeFlags, r writeRequest, id string, snap *model.Snapshot) error {
	p, err := a.planner(client, f, r.extra...)
	if err != nil {
		return err
	}
	plan, err := r.plan(p, ctx, id, snap)
	if err != nil {
		return withHint(a.firestoreWait(err))
	}
	return a.output(r.asJSON, plan, plan.WriteText)
}

// backfillDates are the dates a backfill task writes: its inputs (listed,
// selected and checked), those --skip-complete found complete, its shard.
type backfillDates struct {
	mine     []backfill.Input
	complete map[string]string
	shard    backfill.Shard
	loader   *input.Loader
}

// backfillPlan is backfill's --dry-run: the plan of each date of d,
// printed as a table or JSON.
func (a *app) backfillPlan(ctx context.Context, client *firestore.Client, f writeFlags, b backfillFlags, d backfillDates) error {
	p, err := a.planner(client, f, snapshot.WithSkipComplete(b.skipComplete))
	if err != nil {
		return err
	}
	rep, err := backfill.Plan(ctx, d.loader, d.mine, d.complete, d.shard, p)
	if err != nil {
		return a.firestoreWait(err)
	}
	return a.output(b.asJSON, rep, rep.WriteTable)
}
