package snapshot

import (
	"context"
	"fmt"
	"strings"

	vkit "cloud.google.com/go/firestore/apiv1"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"github.com/googleapis/gax-go/v2"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/snapwriter/snapwriter/internal/fstx"
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
// it (60 s). (A read the attempt's timeout abandons is not lost: it is
// left to finish and roll back, fstx.) That is safe because nothing in a write needs the fence
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
	tid, _, err = w.apiTxn(ctx, apiTx{docs: []string{c.fence}, prepare: c.prepare,
		decide: func(_ context.Context, _ []byte, found map[string]*pb.Document) ([]*pb.Write, error) {
			return c.decide(found[c.fence])
		}}, prev)
	return tid, err
}

// rollback ends transaction tid (nil: none) that will not commit, so
// that the server releases what it read at once instead of when the
// transaction expires (fstx.Rollback).
func (w *Writer) rollback(ctx context.Context, db string, tid []byte) {
	fstx.Rollback(ctx, w.api, db, tid)
}
