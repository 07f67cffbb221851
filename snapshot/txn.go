package snapshot

import (
	"context"
	"errors"
	"io"
	"iter"
	"strings"
	"time"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/internal/fstx"
	"github.com/snapwriter/snapwriter/retry"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// Every read-write transaction of a write, a repair and a prune — the
// root transaction, the chunks, the progress records, the finish, the
// repair's takeover, the prune's marks and deletes — is a txn run by
// job.transact (or, for a progress record, which its recorder retries
// itself, job.attempt): the Firestore API called directly, not the
// client's RunTransaction. So there is one place that begins a
// transaction, checks the fence, handles ABORTED and a commit whose
// outcome is unknown, and takes district writes from the write budget.
//
// A transaction is begun by its first read (BatchGetDocuments with
// new_transaction), which fetches every document the transaction needs at
// once: a transaction that reads and writes is two round trips, the read
// and the commit, where the client's spends one on BeginTransaction and
// one on each read. Its guarantees are those of any Firestore
// transaction: what it read holds until it commits, or it fails. What a
// read whose answer is lost leaves behind is in package fstx; a txn that
// sets explicitBegin begins with BeginTransaction instead, as the client
// does, so that its id is known before the read and it can always be
// rolled back.

// txn is one read-write transaction, as every attempt of it runs.
type txn struct {
	// reads are the documents (full names) the read that begins the
	// transaction fetches. The fence document is added when fenced.
	reads []string
	// fenced requires the snapshot's fence document, read with reads, to
	// carry this job's fence: a newer writer's root commit writes it, and
	// so conflicts with the read. A mismatch is ErrFencedOut, not retried.
	fenced bool
	// explicitBegin begins the transaction with BeginTransaction before
	// its read whatever WithInlineBegin says: the progress records, the
	// repair's takeover and the prune's transactions, whose read of the
	// root must never outlive them (a lost read answer would leave the
	// root held until Firestore expires it).
	explicitBegin bool
	// paced is how many district writes each attempt first takes from
	// the write budget, outside the attempt's timeout, with the store's
	// answer going back to it (pacer); 0 takes nothing.
	paced int
	// prepare, if set, runs while the first read is on its way, so that
	// encoding writes costs no round trip.
	prepare func() error
	// body is handed the attempt, with the documents read, and adds the
	// writes to commit; it may read more in the transaction (ids).
	body func(ctx context.Context, a *attempt) error
}

// attempt is one attempt of a txn: what its first read found, and the
// writes its body adds.
type attempt struct {
	w      *Writer
	db     string
	tid    []byte
	found  map[string]*pb.Document // by full name; missing documents absent
	writes []*pb.Write
}

// doc is the document name as the transaction's first read found it, nil
// when it does not exist.
func (a *attempt) doc(name string) *pb.Document { return a.found[name] }

// write adds ws to what the attempt commits.
func (a *attempt) write(ws ...*pb.Write) { a.writes = append(a.writes, ws...) }

// set adds the write that replaces document name with layout struct v.
func (a *attempt) set(name string, v any) error {
	w, err := layout.SetWrite(name, v)
	if err != nil {
		return retry.Permanent(err)
	}
	a.write(w)
	return nil
}

// delete adds the delete of document name.
func (a *attempt) delete(name string) { a.write(layout.DeleteWrite(name)) }

// ids lists, in the transaction, the ids of the documents of collection
// coll under parent (a document's full name).
func (a *attempt) ids(ctx context.Context, parent, coll string) ([]string, error) {
	return a.w.queryIDs(ctx, a.tid, parent, coll)
}

// query runs q under parent (a document's full name, or the database's
// documents root) in the transaction and returns the documents it finds,
// in order.
func (a *attempt) query(ctx context.Context, parent string, q *pb.StructuredQuery) ([]*pb.Document, error) {
	var docs []*pb.Document
	for d, err := range a.stream(ctx, parent, q) {
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// stream is query's documents one at a time, as they arrive.
func (a *attempt) stream(ctx context.Context, parent string, q *pb.StructuredQuery) iter.Seq2[*pb.Document, error] {
	return a.w.runQuery(ctx, a.tid, parent, q)
}

// txnStats is what transact tells of a transaction: its retries, whether
// a commit may have been applied although no attempt was seen to succeed,
// how many attempts retried an aborted one (contention), and how long its
// attempts waited for the write budget.
type txnStats struct {
	retry.Stats
	unsure  bool
	aborted int
	waited  time.Duration
}

// transact runs t under retry policy p, one attempt per try (attempt),
// as retryAttempts retries them.
func (j *job) transact(ctx context.Context, p retry.Policy, t txn) (txnStats, error) {
	return j.retryAttempts(ctx, p, t.paced, func(ctx context.Context, prev []byte) ([]byte, error) {
		return j.attempt(ctx, t, prev)
	})
}

// retryAttempts runs try under retry policy p: contention (ABORTED) is
// retried for the contention wait, each attempt after an aborted one
// retrying that transaction (prev, its id), which the server then gives
// priority; the first contention of the job is explained in one WARNING.
// A commit whose outcome is unknown is retried as a fresh transaction:
// every write is a set or a delete, so repeating one that was applied
// changes nothing. Once the job is superseded no attempt starts. When
// paced, each attempt first takes that many district writes from the
// write budget, outside the attempt's timeout, and the store's answer
// goes back to it.
func (j *job) retryAttempts(ctx context.Context, p retry.Policy, paced int, try func(ctx context.Context, prev []byte) ([]byte, error)) (txnStats, error) {
	var s txnStats
	var prev []byte // the last attempt's transaction, when it was aborted
	// taken is when the attempt's writes were taken from the budget: an
	// attempt admitted at the rate before a cut is of the wave that made
	// it, however late its turn came.
	var taken time.Time
	opts := []retry.Option{retry.WithNotify(j.notify(ctx))}
	if paced > 0 {
		opts = append(opts, retry.WithGate(func(ctx context.Context) error {
			taken = time.Now()
			d, err := j.adm.Wait(ctx, paced)
			s.waited += d
			return err
		}))
	}
	var err error
	s.Stats, err = retry.Do(ctx, p, func(ctx context.Context) error {
		if j.superseded.Load() {
			return retry.Permanent(errSuperseded)
		}
		if prev != nil {
			s.aborted++
		}
		tid, err := try(ctx, prev)
		if paced > 0 {
			j.adm.Answered(ctx, err, taken, paced)
		}
		prev = nil
		if status.Code(err) == codes.Aborted {
			prev = tid
		}
		s.unsure = s.unsure || errors.As(err, new(*unknownOutcome))
		return err
	}, opts...)
	return s, err
}

// attempt runs one attempt of t: it reads t's documents in a new
// transaction (retrying prev, the attempt before, when that one was
// aborted), runs t.prepare while the read is on its way, checks the fence
// when t is fenced, hands the attempt to t.body and commits the writes it
// added. It returns the transaction's id, for the next attempt's prev.
// A commit error whose outcome is unknown comes back as an
// *unknownOutcome marked retry.Transient.
func (j *job) attempt(ctx context.Context, t txn, prev []byte) (tid []byte, err error) {
	w := j.w
	docs := t.reads
	fence := ""
	if t.fenced {
		fence = j.names.Fence.Path
		docs = append([]string{fence}, docs...)
	}
	db := databaseOf(docs[0])
	ctx = fstx.WithDatabase(ctx, db)
	// The read is never cancelled by ctx (fstx): an attempt that times out
	// mid-read leaves it to roll back the transaction it began, which
	// would otherwise hold its reads until Firestore expires it, and the
	// attempt's retry with them.
	var read *fstx.Read
	if w.cfg.inlineBegin && !t.explicitBegin {
		read = w.reads.Begin(ctx, w.api, db, docs, fstx.ReadWrite(prev))
	} else {
		began, err := w.api.BeginTransaction(ctx, &pb.BeginTransactionRequest{Database: db, Options: fstx.ReadWrite(prev)}, fstx.NoRetry)
		if err != nil {
			return nil, err
		}
		read = w.reads.ReadIn(ctx, w.api, db, docs, began.GetTransaction())
	}
	if t.prepare != nil {
		if err := t.prepare(); err != nil {
			read.Abandon() // its transaction is rolled back when its id arrives
			return nil, err
		}
	}
	res := read.Wait(ctx)
	if res.Err != nil {
		return res.Tid, res.Err // rolled back already
	}
	a := &attempt{w: w, db: db, tid: res.Tid, found: res.Found}
	if err := j.decide(ctx, t, a, fence); err != nil {
		fstx.Rollback(ctx, w.api, db, a.tid)
		return a.tid, err
	}
	_, err = w.api.Commit(ctx, &pb.CommitRequest{Database: db, Writes: a.writes, Transaction: a.tid}, fstx.NoRetry)
	if err == nil {
		return a.tid, nil
	}
	// As the Firestore client does after a failed commit: a commit that
	// never reached the server would otherwise leave the reads holding
	// their locks until the transaction expires, and one that was applied
	// makes this a no-op.
	fstx.Rollback(ctx, w.api, db, a.tid)
	if commitOutcomeUnknown(err) {
		return a.tid, retry.Transient(&unknownOutcome{err})
	}
	return a.tid, err
}

// decide checks a's fence document (when fence names one) and runs t's
// body on a.
func (j *job) decide(ctx context.Context, t txn, a *attempt, fence string) error {
	if fence != "" {
		if err := j.in.fenceProblem(a.doc(fence)); err != nil {
			return retry.Permanent(err)
		}
	}
	return t.body(ctx, a)
}

// queryIDs lists, in transaction tid (none: outside any), the ids of the
// documents of collection coll under parent (a document's full name).
func (w *Writer) queryIDs(ctx context.Context, tid []byte, parent, coll string) ([]string, error) {
	var ids []string
	for d, err := range w.runQuery(ctx, tid, parent, &pb.StructuredQuery{
		From:   []*pb.StructuredQuery_CollectionSelector{{CollectionId: coll}},
		Select: &pb.StructuredQuery_Projection{Fields: []*pb.StructuredQuery_FieldReference{{FieldPath: "__name__"}}},
	}) {
		if err != nil {
			return nil, err
		}
		ids = append(ids, layout.BaseName(d.GetName()))
	}
	return ids, nil
}

// runQuery runs q under parent (a document's full name, or the
// database's documents root) in transaction tid (none: outside any): the
// documents it finds, in order, one at a time as they arrive.
func (w *Writer) runQuery(ctx context.Context, tid []byte, parent string, q *pb.StructuredQuery) iter.Seq2[*pb.Document, error] {
	return func(yield func(*pb.Document, error) bool) {
		ctx, cancel := context.WithCancel(fstx.WithDatabase(ctx, databaseOf(parent)))
		defer cancel() // ends the stream when the caller stops early
		req := &pb.RunQueryRequest{Parent: parent, QueryType: &pb.RunQueryRequest_StructuredQuery{StructuredQuery: q}}
		if len(tid) > 0 {
			req.ConsistencySelector = &pb.RunQueryRequest_Transaction{Transaction: tid}
		}
		stream, err := w.api.RunQuery(ctx, req, fstx.NoRetry)
		if err != nil {
			yield(nil, err)
			return
		}
		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(nil, err)
				return
			}
			if d := resp.GetDocument(); d != nil && !yield(d, nil) {
				return
			}
		}
	}
}

// databaseOf is the database resource name ("projects/P/databases/D") in a
// full name under it: a document's, or the database's documents root.
func databaseOf(name string) string {
	n := 0
	for i := range len(name) {
		if name[i] == '/' {
			if n++; n == 4 {
				return name[:i]
			}
		}
	}
	return name
}

// unknownOutcome is a commit error after which the commit may or may not
// have been applied: the connection broke, the deadline passed with the
// request sent, or the client's own retry of the commit found the
// transaction already closed (by the first commit, which did apply).
type unknownOutcome struct{ err error }

func (u *unknownOutcome) Error() string { return "outcome unknown: " + u.err.Error() }

func (u *unknownOutcome) Unwrap() error { return u.err }

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
