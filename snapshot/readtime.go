package snapshot

import (
	"context"
	"errors"
	"time"

	"cloud.google.com/go/firestore"
)

// TransactionIdleExpiry is how long Firestore, and its emulator, keep a
// transaction nobody uses: a writer killed inside a transaction leaves it
// open that long, with the locks it took.
const TransactionIdleExpiry = 60 * time.Second

// defaultReadOnlyBudget is how long one read-only transaction of a view
// goes on reading: the next batch after that opens a new one, at the same
// read time. A transaction sits idle while the caller consumes a batch (a
// slow pipe on stdout), and Firestore ends one idle for
// TransactionIdleExpiry, or older than 270 s: the budget stays well inside
// both, and costs two round trips (begin, rollback) per budget.
const defaultReadOnlyBudget = TransactionIdleExpiry / 2

// view reads documents as they were at one moment, its read time: that of
// the read of a snapshot's root that opened it. Every read a Reader makes
// of one snapshot after its root goes through the root's view, so that the
// root, its manifest pages and its district documents are one state of the
// database, never a root of one write with the districts of the next.
//
// None of these reads is in a read-write transaction, so none takes a
// lock, and none waited, on the emulator, on a writer at work or on a
// transaction a killed writer left open (docs/reads.md). Firestore serves read times within the last hour (seven days with
// point-in-time recovery), so a reader that takes longer fails instead of
// mixing moments.
type view struct {
	client *firestore.Client
	at     time.Time     // zero when the server gave no read time: reads are then plain
	budget time.Duration // how long one read-only transaction of getBatches reads
}

// openRoot reads root document ref, a plain read (which takes no lock), and
// returns it with the view at its read time. A missing root is returned as
// Get returns it: a snapshot that does not exist, and a NotFound error.
func (r *Reader) openRoot(ctx context.Context, ref *firestore.DocumentRef) (*firestore.DocumentSnapshot, view, error) {
	doc, err := ref.Get(ctx)
	v := view{client: r.client, budget: r.readBudget}
	if doc != nil {
		// Firestore takes read times in microseconds; the server's are.
		v.at = doc.ReadTime.Truncate(time.Microsecond)
	}
	return doc, v, err
}

// options are the read options of a read in v.
func (v view) options() []firestore.ReadOption {
	if v.at.IsZero() {
		return nil
	}
	return []firestore.ReadOption{firestore.ReadTime(v.at)}
}

// collection is collection name under ref, read in v. It is a new
// CollectionRef: the client keeps read options in the reference and
// shares them with every query built on it, so a view never sets them on
// a reference someone else holds.
func (v view) collection(ref *firestore.DocumentRef, name string) *firestore.CollectionRef {
	return ref.Collection(name).WithReadOptions(v.options()...)
}

// errViewDone ends a read-only transaction of getBatches without a commit:
// it wrote nothing, and a commit could only fail once the transaction had
// sat idle while the caller consumed a batch, though its reads were good.
var errViewDone = errors.New("view: read-only transaction done")

// getBatches reads the documents refs names in v, size at a time and in
// order, and calls fn with each batch's documents (a missing one has
// Exists false) before it reads the next. The client reads many documents
// at a read time only in a transaction: the batches are read in read-only
// transactions at v's read time, each reading for at most v.budget, so
// that a caller that takes its time between batches (a slow consumer of
// get's output) outlasts none of Firestore's transaction limits. An error
// of fn is returned as it is.
func (v view) getBatches(ctx context.Context, refs []*firestore.DocumentRef, size int, fn func([]*firestore.DocumentSnapshot) error) error {
	var fnErr error
	for len(refs) > 0 {
		opts := []firestore.TransactionOption{firestore.ReadOnly}
		if !v.at.IsZero() {
			opts = []firestore.TransactionOption{firestore.TransactionReadTime(v.at)}
		}
		err := v.client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
			began := time.Now()
			for {
				batch := refs[:min(size, len(refs))]
				docs, err := tx.GetAll(batch)
				if err != nil {
					return err
				}
				refs = refs[len(batch):]
				if fnErr = fn(docs); fnErr != nil {
					return fnErr
				}
				// Checked after a batch, so that each transaction reads
				// at least one.
				if len(refs) == 0 || time.Since(began) >= v.budget {
					return errViewDone
				}
			}
		}, opts...)
		switch {
		case fnErr != nil:
			return fnErr
		case !errors.Is(err, errViewDone):
			return err
		}
	}
	return nil
}

// get reads the document ref names in v (Exists false when it is missing).
func (v view) get(ctx context.Context, ref *firestore.DocumentRef) (*firestore.DocumentSnapshot, error) {
	var doc *firestore.DocumentSnapshot
	err := v.getBatches(ctx, []*firestore.DocumentRef{ref}, 1, func(docs []*firestore.DocumentSnapshot) error {
		doc = docs[0]
		return nil
	})
	return doc, err
}
