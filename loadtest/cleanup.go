package loadtest

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/firestore"
	"golang.org/x/sync/errgroup"
	"google.golang.org/api/iterator"

	"github.com/snapwriter/snapwriter/internal/safego"
	"github.com/snapwriter/snapwriter/retry"
)

// deleteConcurrency is how many delete transactions run at once: enough to
// clear 100,000 districts in a few minutes, few enough not to compete with
// anything else writing to the database.
const deleteConcurrency = 4

// scan reads the root of every document in the collection and returns
// those loadtest wrote (metadata.source == Source). Unless skipForeign, it
// fails with ErrRefused, naming the document, at the first one that is
// anything else: a snapshot of another writer, a document of another
// shape, or a "missing" document (no root, but subcollections) — loadtest
// deletes a root only after everything below it, so it never leaves one.
// With skipForeign such documents are left out, and alone.
func scan(ctx context.Context, client *firestore.Client, collection string, skipForeign bool) ([]*firestore.DocumentRef, error) {
	coll := client.Collection(collection)
	ours := map[string]bool{}
	var roots []*firestore.DocumentRef
	// Only the one field: a foreign collection's roots may be large.
	it := coll.Select("metadata.source").Documents(ctx)
	defer it.Stop()
	for {
		doc, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading collection %q: %w", collection, err)
		}
		src, _ := doc.DataAt("metadata.source")
		if src != Source && skipForeign {
			continue
		}
		if src != Source {
			what := "a document that is not a snapshot"
			if src != nil {
				what = fmt.Sprintf("a snapshot with source %q", src)
			}
			return nil, fmt.Errorf("%w: collection %q holds %s (%s); loadtest writes only into a collection that holds nothing but its own snapshots",
				ErrRefused, collection, what, doc.Ref.ID)
		}
		ours[doc.Ref.ID] = true
		roots = append(roots, doc.Ref)
	}
	// Documents with subcollections but no root are listed only this way.
	refs := coll.DocumentRefs(ctx)
	for {
		ref, err := refs.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("listing collection %q: %w", collection, err)
		}
		if !ours[ref.ID] && !skipForeign {
			return nil, fmt.Errorf("%w: collection %q holds subcollections under %s, which has no root document: not loadtest's (it deletes a root last); delete them or choose another collection",
				ErrRefused, collection, ref.ID)
		}
	}
	return roots, nil
}

// cleaner deletes what loadtest wrote.
type cleaner struct {
	client *firestore.Client
	batch  int
	policy retry.Policy
}

// deleteSnapshot deletes root and every document of its subcollections
// (districts, manifest pages, the fence document, and any other the
// writer keeps there), the root last, so that an interrupted cleanup
// leaves a root that marks what is left as loadtest's. It returns how many
// documents it deleted (counting documents already gone).
func (c cleaner) deleteSnapshot(ctx context.Context, root *firestore.DocumentRef) (int, error) {
	var below []*firestore.DocumentRef
	colls := root.Collections(ctx)
	for {
		coll, err := colls.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("listing the subcollections of %s: %w", root.ID, err)
		}
		// The snapshot layout has no deeper collections: listing every
		// district's own subcollections would double the cleanup's reads.
		refs, err := coll.DocumentRefs(ctx).GetAll()
		if err != nil {
			return 0, fmt.Errorf("listing %s/%s: %w", root.ID, coll.ID, err)
		}
		below = append(below, refs...)
	}
	if err := c.delete(ctx, below); err != nil {
		return 0, fmt.Errorf("deleting below %s: %w", root.ID, err)
	}
	if err := c.delete(ctx, []*firestore.DocumentRef{root}); err != nil {
		return len(below), fmt.Errorf("deleting %s: %w", root.ID, err)
	}
	return len(below) + 1, nil
}

// delete deletes refs in transactions of at most c.batch deletes, each
// retried by c.policy, a few at once. Deleting a document that is gone is
// no error, so a retried or repeated delete is harmless.
func (c cleaner) delete(ctx context.Context, refs []*firestore.DocumentRef) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(deleteConcurrency)
	for start := 0; start < len(refs); start += c.batch {
		chunk := refs[start:min(start+c.batch, len(refs))]
		g.Go(safego.Func(func() error {
			_, err := retry.Do(gctx, c.policy, func(ctx context.Context) error {
				// One attempt per call: retry.Do owns the policy, as the
				// writer's chunks do.
				return c.client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
					for _, ref := range chunk {
						if err := tx.Delete(ref); err != nil {
							return err
						}
					}
					return nil
				}, firestore.MaxAttempts(1))
			})
			return err
		}))
	}
	err := g.Wait()
	safego.Repanic(err) // in the caller's goroutine, which the CLI recovers: not taken for an input's error
	return err
}
