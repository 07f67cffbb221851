// Package fstx begins Firestore read-write transactions with their first
// read (BatchGetDocuments with new_transaction), so that a transaction
// that reads and writes is two round trips, the read and the commit,
// instead of the client's three (BeginTransaction first).
//
// A transaction begun this way has a hazard the client's has not: its id
// arrives with the read's answer. A read abandoned before that answer —
// its context cancelled or timed out, as a caller's cancellation or a
// retry layer's attempt timeout does — leaves behind a transaction nobody
// can commit or roll back, and the read locks it took on the documents
// hold until the server expires it (Firestore: after 60 s idle). Every
// commit that writes one of those documents waits on it and fails
// (ABORTED; "Transaction lock timeout" on the emulator, after 2 s) until
// then: for the snapshot's root or fence document, a writer's own retry
// blocked for a minute; for a lock document (firestorelock.WithAPIClient),
// a minute in which nobody can take, extend or release the lock. The
// client's RunTransaction knows its transaction's id before the first
// read, and rolls it back.
//
// So a Read is never cancelled by its caller once it can have reached the
// server (its connection is ready; until then the caller's cancellation
// ends it, nothing sent): it runs detached from the caller's
// cancellation, bounded by a minute; a caller that stops
// waiting (Wait's context ends, or Abandon) leaves it to finish in the
// background, and the transaction it began is rolled back as soon as its
// id arrives. What remains is the answer the network loses (a connection
// reset mid-read, or a read that hangs past its minute): nothing then
// knows the transaction's id, and its locks hold until the server expires
// it.
package fstx

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	vkit "cloud.google.com/go/firestore/apiv1"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// NoRetry turns off the API client's own retries of a call: a read that
// begins a transaction, sent twice, would begin two, and a caller's retry
// layer decides every retry.
var NoRetry = gax.WithRetry(func() gax.Retryer { return nil })

// readTimeout bounds a Read. Its caller's cancellation does not end it,
// and past a minute there is nothing left to release: the server expires
// an idle transaction after 60 s.
const readTimeout = time.Minute

// rollbackTimeout bounds a rollback: it runs detached from any caller, and
// its failure changes nothing (the server expires the transaction anyway).
const rollbackTimeout = 5 * time.Second

// WithDatabase is ctx carrying the header the Firestore client sends on
// every call, by which the service routes requests: the database db
// ("projects/P/databases/D").
func WithDatabase(ctx context.Context, db string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "google-cloud-resource-prefix", db)
}

// ReadWrite is the options of a read-write transaction that retries prev
// (nil: none), the attempt before it that Firestore aborted: naming it
// makes the server give the new one priority, as the Firestore client
// does.
func ReadWrite(prev []byte) *pb.TransactionOptions {
	return &pb.TransactionOptions{Mode: &pb.TransactionOptions_ReadWrite_{
		ReadWrite: &pb.TransactionOptions_ReadWrite{RetryTransaction: prev}}}
}

// Read is a read that begins a transaction, on its way (Begin). Its
// caller must either Wait for it or Abandon it.
type Read struct {
	result  chan Result   // unbuffered: a receive hands the transaction over
	abandon chan struct{} // closed by Abandon or by a Wait that stops waiting
	once    sync.Once     // closes abandon
}

// Result is what a Read found: the transaction it began (nil if its id
// never arrived), the documents it read by full name (missing ones
// absent), or its error. A Read that failed has rolled back the
// transaction it began; Tid is still set then, for the next attempt's
// ReadWrite (an aborted read is retried as a transaction is).
type Result struct {
	Tid   []byte
	Found map[string]*pb.Document
	Err   error
}

// Begin starts reading the documents names (full names, at least one) of
// database db in a new transaction with opts (ReadWrite), on api,
// detached from ctx's cancellation (it keeps ctx's values) and bounded by
// a minute. See the package doc for why it is never cancelled.
func (p *Pending) Begin(ctx context.Context, api *vkit.Client, db string, names []string, opts *pb.TransactionOptions) *Read {
	return p.start(ctx, api, db, nil, &pb.BatchGetDocumentsRequest{Database: db, Documents: names,
		ConsistencySelector: &pb.BatchGetDocumentsRequest_NewTransaction{NewTransaction: opts}})
}

// ReadIn is Begin for a transaction tid begun beforehand
// (BeginTransaction): the read is in it, and the Read treats it as its
// own (rolled back if the read fails or is abandoned).
func (p *Pending) ReadIn(ctx context.Context, api *vkit.Client, db string, names []string, tid []byte) *Read {
	return p.start(ctx, api, db, tid, &pb.BatchGetDocumentsRequest{Database: db, Documents: names,
		ConsistencySelector: &pb.BatchGetDocumentsRequest_Transaction{Transaction: tid}})
}

func (p *Pending) start(ctx context.Context, api *vkit.Client, db string, tid []byte, req *pb.BatchGetDocumentsRequest) *Read {
	r := &Read{result: make(chan Result), abandon: make(chan struct{})}
	rctx, cancel := context.WithTimeout(WithDatabase(context.WithoutCancel(ctx), db), readTimeout)
	p.mu.Lock()
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		res := Result{Tid: tid}
		if err := awaitConnection(ctx, api); err != nil {
			res.Err = err
		} else {
			res = read(rctx, api, req, tid)
		}
		cancel()
		if res.Err != nil {
			Rollback(ctx, api, db, res.Tid)
		}
		select {
		case r.result <- res:
		case <-r.abandon:
			// Nobody will commit it: let go of what it read now.
			if res.Err == nil {
				Rollback(ctx, api, db, res.Tid)
			}
		}
	}()
	return r
}

// awaitConnection waits, within the caller's ctx, for api's connection to
// be ready to carry the read, so that only a read that can have reached
// the server is detached from its caller: one to a store that accepts
// connections and never answers (a black hole) would otherwise wait for
// gRPC's connect timeout, 20 s, past any bound of the caller's, and hold
// its owner's Close as long. While the connection is not ready nothing has
// been sent, so giving up then leaves no transaction behind. A connection
// that failed (refused) is left to the read, which fails at once. api's
// connection is its only one with the API client's default pool of one;
// with a larger pool this checks one of them.
func awaitConnection(ctx context.Context, api *vkit.Client) error {
	//lint:ignore SA1019 the connection's state, not a resource to use: one connection with the default pool
	conn := api.Connection()
	if conn == nil {
		return nil
	}
	for {
		st := conn.GetState()
		switch st {
		case connectivity.Ready, connectivity.TransientFailure, connectivity.Shutdown:
			return nil
		case connectivity.Idle:
			conn.Connect()
		}
		if !conn.WaitForStateChange(ctx, st) {
			return ctx.Err()
		}
	}
}

// read sends req, in transaction tid when it was begun beforehand, and
// reads its answer.
func read(ctx context.Context, api *vkit.Client, req *pb.BatchGetDocumentsRequest, tid []byte) (res Result) {
	res.Tid = tid
	stream, err := api.BatchGetDocuments(ctx, req, NoRetry)
	if err != nil {
		res.Err = err
		return res
	}
	res.Found = make(map[string]*pb.Document, len(req.GetDocuments()))
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			res.Err = err
			return res
		}
		if len(resp.GetTransaction()) > 0 {
			res.Tid = resp.GetTransaction()
		}
		if d := resp.GetFound(); d != nil {
			res.Found[d.GetName()] = d
		}
	}
	if len(res.Tid) == 0 {
		res.Err = status.Error(codes.Internal, "the read that begins the transaction returned no transaction")
	}
	return res
}

// Wait waits for the read's answer. If ctx ends first, Wait abandons the
// read (its transaction is rolled back when it arrives) and returns
// ctx's error.
func (r *Read) Wait(ctx context.Context) Result {
	select {
	case res := <-r.result:
		return res
	case <-ctx.Done():
		r.Abandon()
		return Result{Err: ctx.Err()}
	}
}

// Abandon says the caller will not use the read: the transaction it
// began is rolled back as soon as its id arrives. After a Wait that
// returned the read's answer it does nothing: the transaction is the
// caller's then.
func (r *Read) Abandon() { r.once.Do(func() { close(r.abandon) }) }

// Rollback ends transaction tid (nil: none) of database db, which will
// not commit, so that the server releases what it read at once instead of
// when the transaction expires. It runs detached from ctx's cancellation
// (an attempt that timed out must still let go), briefly, and its failure
// changes nothing: the server expires the transaction anyway.
func Rollback(ctx context.Context, api *vkit.Client, db string, tid []byte) {
	if len(tid) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(WithDatabase(context.WithoutCancel(ctx), db), rollbackTimeout)
	defer cancel()
	_ = api.Rollback(rctx, &pb.RollbackRequest{Database: db, Transaction: tid}, NoRetry)
}

// Pending begins the Reads of one owner of a Firestore API client and
// tracks them, so that the owner's Close can wait for the abandoned ones
// to finish and roll back before it closes the client they run on. The
// zero Pending is ready to use.
type Pending struct {
	mu sync.Mutex // orders a Begin's Add before Wait
	wg sync.WaitGroup
}

// Wait waits for every Read begun so far to be over, its rollback
// included (each bounded by its timeout and a rollback's). Reads begun
// meanwhile wait for it.
func (p *Pending) Wait() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wg.Wait()
}
