package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	vkit "cloud.google.com/go/firestore/apiv1"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"github.com/googleapis/gax-go/v2"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/retry"
)

// A district chunk is one read-write transaction on the Firestore API
// itself rather than on the client's RunTransaction, so that its
// documents are encoded once and its retries are the retry layer's alone.
// By default its fence read begins the transaction (BatchGetDocuments with
// new_transaction), so a chunk is two round trips: the read and the
// commit. WithInlineBegin(false) makes the client's three (a
// BeginTransaction first). The guarantees are the same either way: the
// read and the writes are one transaction, so a newer writer's fence
// write either comes before the read, and is seen, or conflicts with it.
// What differs is a read whose answer is lost (a connection reset): begun
// inline, its transaction's id is lost with it, so nothing can roll it
// back, and its read of the fence document holds until the server expires
// it (60 s). That is safe because nothing in a write needs the fence
// document exclusively: chunks and progress records only read it, and the
// finish writes it only to settle a chunk commit of unknown outcome (and
// then outlasts such a read within the contention wait). A newer writer
// taking the snapshot over writes it, and waits as it waits for a writer
// killed mid-chunk.

// emulatorHostEnv names the Firestore emulator, as the Firestore client
// reads it.
const emulatorHostEnv = "FIRESTORE_EMULATOR_HOST"

// noRetry turns off the API client's own retries of a call: the retry
// layer decides every retry, and a transaction begun by a read must not be
// begun twice behind its back.
var noRetry = gax.WithRetry(func() gax.Retryer { return nil })

// DialAPI opens the Firestore API client a Writer's chunks run on (see
// WithAPIClient) as firestore.NewClient finds Firestore: on the emulator
// at emulatorHost (host:port, as FIRESTORE_EMULATOR_HOST names it) when
// it is not empty, else on Firestore itself with opts (by default,
// Application Default Credentials).
func DialAPI(ctx context.Context, emulatorHost string, opts ...option.ClientOption) (*vkit.Client, error) {
	if emulatorHost == "" {
		return vkit.NewClient(ctx, opts...)
	}
	// With OpenTelemetry's gRPC instrumentation, as the transport the
	// Firestore client dials the emulator (and Firestore) with has.
	conn, err := grpc.NewClient(emulatorHost,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(emulatorOwner{}),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler()))
	if err != nil {
		return nil, fmt.Errorf("dialing the emulator at %s: %w", emulatorHost, err)
	}
	return vkit.NewClient(ctx, option.WithGRPCConn(conn))
}

// emulatorOwner is the emulator's admin credential, as the Firestore
// client sends it: it bypasses security rules.
type emulatorOwner struct{}

func (emulatorOwner) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer owner"}, nil
}
func (emulatorOwner) RequireTransportSecurity() bool { return false }

// databaseOf is the database resource name ("projects/P/databases/D") in a
// document's full name.
func databaseOf(docName string) string {
	db, _, _ := strings.Cut(docName, "/documents/")
	return db
}

// chunkTx is one chunk's transaction, as every attempt of it runs: the
// name of the fence document it reads; prepare, run while that read is on
// its way (so that encoding the chunk's documents costs no round trip);
// and decide, handed the fence document (nil when it is missing), which
// returns the writes to commit.
type chunkTx struct {
	fence   string
	prepare func() error
	decide  func(fence *pb.Document) ([]*pb.Write, error)
}

// chunkTxn runs one attempt of chunk transaction c: it reads the fence
// document in a new transaction (retrying prev, the attempt before, when
// that one was aborted: the server then gives this one priority), runs
// c.prepare while the read is on its way, hands the fence document to
// c.decide, and commits the writes it returns. It returns the
// transaction's id, for the next attempt's prev.
//
// A commit error whose outcome is unknown comes back as an *unknownOutcome
// marked retry.Transient, as txn's do.
func (w *Writer) chunkTxn(ctx context.Context, c chunkTx, prev []byte) (tid []byte, err error) {
	db := databaseOf(c.fence)
	// The header the Firestore client sends on every call: the service
	// routes requests by it.
	ctx = metadata.AppendToOutgoingContext(ctx, "google-cloud-resource-prefix", db)
	opts := &pb.TransactionOptions{Mode: &pb.TransactionOptions_ReadWrite_{
		ReadWrite: &pb.TransactionOptions_ReadWrite{RetryTransaction: prev}}}
	req := &pb.BatchGetDocumentsRequest{Database: db, Documents: []string{c.fence}}
	if w.cfg.inlineBegin {
		req.ConsistencySelector = &pb.BatchGetDocumentsRequest_NewTransaction{NewTransaction: opts}
	} else {
		began, err := w.api.BeginTransaction(ctx, &pb.BeginTransactionRequest{Database: db, Options: opts}, noRetry)
		if err != nil {
			return nil, err
		}
		tid = began.GetTransaction()
		req.ConsistencySelector = &pb.BatchGetDocumentsRequest_Transaction{Transaction: tid}
	}
	stream, err := w.api.BatchGetDocuments(ctx, req, noRetry)
	if err != nil {
		w.rollback(ctx, db, tid)
		return tid, err
	}
	if err := c.prepare(); err != nil {
		// Drain the read, so that the transaction it began is known
		// and rolled back.
		for {
			resp, rerr := stream.Recv()
			if rerr != nil {
				break
			}
			if len(resp.GetTransaction()) > 0 {
				tid = resp.GetTransaction()
			}
		}
		w.rollback(ctx, db, tid)
		return tid, err
	}
	var found *pb.Document
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			w.rollback(ctx, db, tid)
			return tid, err
		}
		if len(resp.GetTransaction()) > 0 {
			tid = resp.GetTransaction()
		}
		if d := resp.GetFound(); d != nil {
			found = d
		}
	}
	if len(tid) == 0 {
		return nil, status.Error(codes.Internal, "the read that begins the chunk's transaction returned no transaction")
	}
	writes, err := c.decide(found)
	if err != nil {
		w.rollback(ctx, db, tid)
		return tid, err
	}
	_, err = w.api.Commit(ctx, &pb.CommitRequest{Database: db, Writes: writes, Transaction: tid}, noRetry)
	if err == nil {
		return tid, nil
	}
	// As the Firestore client does after a failed commit: a commit that
	// never reached the server would otherwise leave the fence read
	// holding its lock until the transaction expires, and one that was
	// applied makes this a no-op.
	w.rollback(ctx, db, tid)
	if commitOutcomeUnknown(err) {
		return tid, retry.Transient(&unknownOutcome{err})
	}
	return tid, err
}

// rollback ends transaction tid that will not commit, so that the server
// releases what it read at once instead of when the transaction expires.
// It runs detached from ctx (an attempt that timed out must still let go),
// briefly, and its failure changes nothing: the server expires the
// transaction anyway.
func (w *Writer) rollback(ctx context.Context, db string, tid []byte) {
	if len(tid) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = w.api.Rollback(rctx, &pb.RollbackRequest{Database: db, Transaction: tid}, noRetry)
}
