package snapshot

import (
	"context"
	"errors"
	"io"
	"strings"

	"cloud.google.com/go/firestore"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/googleapis/gax-go/v2"
	"github.com/snapwriter/snapwriter/internal/fstx"
	"github.com/snapwriter/snapwriter/retry"
)

// The write's own transactions — the chunks, the root transaction and the
// finish — run on the Firestore API, not on the client's RunTransaction,
// which spends a round trip on BeginTransaction and one on each read
// before the commit. Here the first read begins the transaction
// (BatchGetDocuments with new_transaction) and fetches every document the
// transaction needs at once, so a transaction that reads and writes is
// two round trips: the read and the commit. The guarantees are those of
// any Firestore transaction: what it read holds until it commits, or it
// fails. See chunk.go for what a read whose answer is lost leaves
// behind.

// apiTx is one read-write transaction on the Firestore API, as every
// attempt of it runs.
type apiTx struct {
	// docs are the documents (full names) the read that begins the
	// transaction reads, at least one.
	docs []string
	// prepare, if set, runs while that read is on its way (so that
	// encoding writes costs no round trip).
	prepare func() error
	// decide is handed the documents read (by name; missing ones absent)
	// and the transaction's id, for further reads in it (queryIDs), and
	// returns the writes to commit.
	decide func(ctx context.Context, tid []byte, found map[string]*pb.Document) ([]*pb.Write, error)
}

// apiTxn runs one attempt of transaction t: it reads t.docs in a new
// transaction (retrying prev, the attempt before, when that one was
// aborted: the server then gives this one priority), runs t.prepare while
// the read is on its way, hands what it read to t.decide, and commits the
// writes it returns. It returns the transaction's id, for the next
// attempt's prev, and the commit's response.
//
// With WithInlineBegin(false) a BeginTransaction comes first, as the
// Firestore client does. A commit error whose outcome is unknown comes
// back as an *unknownOutcome marked retry.Transient, as txn's do.
func (w *Writer) apiTxn(ctx context.Context, t apiTx, prev []byte) (tid []byte, resp *pb.CommitResponse, err error) {
	db := databaseOf(t.docs[0])
	ctx = fstx.WithDatabase(ctx, db)
	// The read is never cancelled by ctx (fstx): an attempt that times out
	// mid-read leaves it to roll back the transaction it began, which
	// would otherwise hold its reads of the root, the fence or the
	// manifest until Firestore expires it, and the attempt's retry with
	// them.
	var read *fstx.Read
	if w.cfg.inlineBegin {
		read = w.reads.Begin(ctx, w.api, db, t.docs, fstx.ReadWrite(prev))
	} else {
		began, err := w.api.BeginTransaction(ctx, &pb.BeginTransactionRequest{Database: db, Options: fstx.ReadWrite(prev)}, noRetry)
		if err != nil {
			return nil, nil, err
		}
		read = w.reads.ReadIn(ctx, w.api, db, t.docs, began.GetTransaction())
	}
	if t.prepare != nil {
		if err := t.prepare(); err != nil {
			read.Abandon() // its transaction is rolled back when its id arrives
			return nil, nil, err
		}
	}
	res := read.Wait(ctx)
	if res.Err != nil {
		return res.Tid, nil, res.Err // rolled back already
	}
	tid = res.Tid
	writes, err := t.decide(ctx, tid, res.Found)
	if err != nil {
		w.rollback(ctx, db, tid)
		return tid, nil, err
	}
	resp, err = w.api.Commit(ctx, &pb.CommitRequest{Database: db, Writes: writes, Transaction: tid}, noRetry)
	if err == nil {
		return tid, resp, nil
	}
	// As the Firestore client does after a failed commit: a commit that
	// never reached the server would otherwise leave the reads holding
	// their locks until the transaction expires, and one that was applied
	// makes this a no-op.
	w.rollback(ctx, db, tid)
	if commitOutcomeUnknown(err) {
		return tid, nil, retry.Transient(&unknownOutcome{err})
	}
	return tid, nil, err
}

// retryAPI runs transaction t under the job's retry policy p, one
// apiTxn per attempt; an attempt after an aborted one retries that
// transaction, which the server then gives priority. aborted counts the
// attempts that did.
func (j *job) retryAPI(ctx context.Context, p retry.Policy, t apiTx) (st retry.Stats, unsure bool, aborted int, err error) {
	var prev []byte // the last attempt's transaction, when it was aborted
	st, unsure, err = j.retry(ctx, p, func(ctx context.Context) error {
		if prev != nil {
			aborted++
		}
		tid, _, err := j.w.apiTxn(ctx, t, prev)
		prev = nil
		if status.Code(err) == codes.Aborted {
			prev = tid
		}
		return err
	})
	return st, unsure, aborted, err
}

// queryIDs lists, in transaction tid (none: outside any), the ids of the
// documents of collection coll under parent (a document's full name).
func (w *Writer) queryIDs(ctx context.Context, tid []byte, parent, coll string) ([]string, error) {
	db := databaseOf(parent)
	ctx = metadata.AppendToOutgoingContext(ctx, "google-cloud-resource-prefix", db)
	req := &pb.RunQueryRequest{Parent: parent, QueryType: &pb.RunQueryRequest_StructuredQuery{StructuredQuery: &pb.StructuredQuery{
		From:   []*pb.StructuredQuery_CollectionSelector{{CollectionId: coll}},
		Select: &pb.StructuredQuery_Projection{Fields: []*pb.StructuredQuery_FieldReference{{FieldPath: "__name__"}}},
	}}}
	if len(tid) > 0 {
		req.ConsistencySelector = &pb.RunQueryRequest_Transaction{Transaction: tid}
	}
	stream, err := w.api.RunQuery(ctx, req, noRetry)
	if err != nil {
		return nil, err
	}
	var ids []string
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return ids, nil
		}
		if err != nil {
			return nil, err
		}
		if d := resp.GetDocument(); d != nil {
			ids = append(ids, lastSegment(d.GetName()))
		}
	}
}

// lastSegment is a document name's id.
func lastSegment(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name[i+1:]
		}
	}
	return name
}

// rollback ends transaction tid (nil: none) that will not commit, so
// that the server releases what it read at once instead of when the
// transaction expires (fstx.Rollback).
func (w *Writer) rollback(ctx context.Context, db string, tid []byte) {
	fstx.Rollback(ctx, w.api, db, tid)
}

// databaseOf is the database resource name ("projects/P/databases/D") in a
// document's full name.
func databaseOf(docName string) string {
	db, _, _ := strings.Cut(docName, "/documents/")
	return db
}

// noRetry turns off the API client's own retries of a call: the retry
// layer decides every retry, and a transaction begun by a read must not be
// begun twice behind its back.
var noRetry = gax.WithRetry(func() gax.Retryer { return nil })

// unknownOutcome is a commit error after which the commit may or may not
// have been applied: the connection broke, the deadline passed with the
// request sent, or the client's own retry of the commit found the
// transaction already closed (by the first commit, which did apply).
type unknownOutcome struct{ err error }

func (u *unknownOutcome) Error() string { return "outcome unknown: " + u.err.Error() }

func (u *unknownOutcome) Unwrap() error { return u.err }

// txn runs fn and commits as one transaction attempt; retries are the
// retry layer's. An error of the commit whose outcome is unknown comes back
// as an *unknownOutcome marked retry.Transient.
func (w *Writer) txn(ctx context.Context, fn func(context.Context, *firestore.Transaction) error) error {
	committing := false
	err := w.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if err := fn(ctx, tx); err != nil {
			return err
		}
		// fn's reads are done and its writes buffered: what fails from
		// here on is the commit.
		committing = true
		return nil
	}, firestore.MaxAttempts(1))
	if err != nil && committing && commitOutcomeUnknown(err) {
		return retry.Transient(&unknownOutcome{err})
	}
	return err
}

// commitOutcomeUnknown reports whether a failed commit may nevertheless
// have been applied. Only answers that the server refused the commit are
// certain; everything else (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED,
// INTERNAL, UNKNOWN, RESOURCE_EXHAUSTED after the client's own retry, …)
// may follow a first attempt that was applied.
func commitOutcomeUnknown(err error) bool {
	switch status.Code(err) {
	case codes.Aborted, codes.FailedPrecondition, codes.PermissionDenied, codes.Unauthenticated,
		codes.NotFound, codes.AlreadyExists, codes.OutOfRange, codes.Unimplemented:
		return false
	case codes.InvalidArgument:
		return transactionClosed(err)
	}
	return true
}

// transactionClosed recognises the INVALID_ARGUMENT a commit gets when its
// transaction was already committed or expired, as a retried commit does
// after a first attempt that was applied ("Transaction is invalid or
// closed" on the emulator, "The referenced transaction has expired or is
// no longer valid" in production).
func transactionClosed(err error) bool {
	msg := strings.ToLower(status.Convert(err).Message())
	if !strings.Contains(msg, "transaction") {
		return false
	}
	for _, s := range []string{"invalid", "closed", "expired", "no longer valid"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
