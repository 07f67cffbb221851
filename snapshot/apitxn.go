package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

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
// fails. See chunktx.go for what a read whose answer is lost leaves
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

// layoutSetWrite is the Write that replaces document name with layout
// struct v, as Transaction.Set sends it (encodeFields: the client's
// encoding of the layout types).
func layoutSetWrite(name string, v any) (*pb.Write, error) {
	w, err := wireSetWrite(name, encodeFields(v))
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", lastSegment(name), err)
	}
	return w, nil
}

// layoutUpdateWrite is the Write that sets the top-level fields of
// document name that fields holds, and only those, on a document that
// must exist: what Transaction.Update sends for []firestore.Update of
// those paths (each value the layout's encoding, encodeFields).
func layoutUpdateWrite(name string, fields map[string]any) (*pb.Write, error) {
	w, err := wireSetWrite(name, fields)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", lastSegment(name), err)
	}
	mask := &pb.DocumentMask{}
	for k := range fields {
		mask.FieldPaths = append(mask.FieldPaths, k)
	}
	w.UpdateMask = mask
	w.CurrentDocument = &pb.Precondition{ConditionType: &pb.Precondition_Exists{Exists: true}}
	return w, nil
}

// fieldsOf is a document read on the Firestore API as
// DocumentSnapshot.Data gives it: what decodeFields reads.
func fieldsOf(doc *pb.Document) map[string]any {
	m := make(map[string]any, len(doc.GetFields()))
	for k, v := range doc.GetFields() {
		m[k] = valueOf(v)
	}
	return m
}

// valueOf is v as the Firestore client gives it (createFromProtoValue),
// but for a reference, which is its name here.
func valueOf(v *pb.Value) any {
	switch x := v.GetValueType().(type) {
	case *pb.Value_BooleanValue:
		return x.BooleanValue
	case *pb.Value_IntegerValue:
		return x.IntegerValue
	case *pb.Value_DoubleValue:
		return x.DoubleValue
	case *pb.Value_TimestampValue:
		return x.TimestampValue.AsTime()
	case *pb.Value_StringValue:
		return x.StringValue
	case *pb.Value_BytesValue:
		return x.BytesValue
	case *pb.Value_ReferenceValue:
		return x.ReferenceValue
	case *pb.Value_GeoPointValue:
		return x.GeoPointValue
	case *pb.Value_ArrayValue:
		vals := x.ArrayValue.GetValues()
		list := make([]any, len(vals))
		for i, e := range vals {
			list[i] = valueOf(e)
		}
		return list
	case *pb.Value_MapValue:
		m := make(map[string]any, len(x.MapValue.GetFields()))
		for k, e := range x.MapValue.GetFields() {
			m[k] = valueOf(e)
		}
		return m
	}
	return nil
}
