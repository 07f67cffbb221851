package snapshot

import (
	"bytes"
	"context"
	"path"
	"sync"
	"testing"

	vkit "cloud.google.com/go/firestore/apiv1"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/model"
)

// rpcLog records the Firestore API calls of a client, unary and
// streaming, with the BatchGetDocuments requests and Commit transactions.
type rpcLog struct {
	mu      sync.Mutex
	calls   map[string]int
	gets    []*firestorepb.BatchGetDocumentsRequest
	commits [][]byte // each Commit's transaction
	// abortFirst, if set, refuses the first Commit of a district chunk
	// with ABORTED before it reaches the emulator (contention).
	abortFirst bool
	aborted    []byte // the transaction of the refused Commit
}

func (l *rpcLog) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	l.mu.Lock()
	l.calls[path.Base(method)]++
	if cr, ok := req.(*firestorepb.CommitRequest); ok {
		l.commits = append(l.commits, cr.GetTransaction())
		if l.abortFirst && l.aborted == nil {
			l.aborted = cr.GetTransaction()
			l.mu.Unlock()
			return status.Error(codes.Aborted, "injected contention")
		}
	}
	l.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (l *rpcLog) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	l.mu.Lock()
	l.calls[path.Base(method)]++
	l.mu.Unlock()
	s, err := streamer(ctx, desc, cc, method, opts...)
	return &loggedStream{ClientStream: s, log: l}, err
}

type loggedStream struct {
	grpc.ClientStream
	log *rpcLog
}

func (s *loggedStream) SendMsg(m any) error {
	if r, ok := m.(*firestorepb.BatchGetDocumentsRequest); ok {
		s.log.mu.Lock()
		s.log.gets = append(s.log.gets, r)
		s.log.mu.Unlock()
	}
	return s.ClientStream.SendMsg(m)
}

// loggedAPI is an API client on the emulator whose every call l records.
func loggedAPI(t *testing.T, l *rpcLog) *vkit.Client {
	t.Helper()
	conn, err := grpc.NewClient(emu.Host,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(emulatorOwner{}),
		grpc.WithChainUnaryInterceptor(l.unary),
		grpc.WithChainStreamInterceptor(l.stream))
	if err != nil {
		t.Fatal(err)
	}
	c, err := vkit.NewClient(context.Background(), option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); _ = conn.Close() })
	return c
}

// By default a fenced chunk is two round trips: the fence read that
// begins its transaction, and the commit of that same transaction. No
// BeginTransaction, no Rollback. The same on either manifest form: the
// chunk writes district documents only, whatever the form.
func TestChunkIsTwoRoundTrips(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) { twoRoundTrips(t, e) })
}

// WithInlineBegin(false) begins a chunk's transaction apart, as the
// Firestore client does: three round trips, the read inside the begun
// transaction.
func TestChunkBeginsApart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := &rpcLog{calls: map[string]int{}}
	in := gen(132, 1) // 3 chunks
	mustWrite(t, e.writer(WithAPIClient(loggedAPI(t, l)), WithInlineBegin(false)), day, in)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.calls) != 3 || l.calls["BeginTransaction"] != 3 || l.calls["BatchGetDocuments"] != 3 || l.calls["Commit"] != 3 {
		t.Fatalf("API calls %v, want 3 each of BeginTransaction, BatchGetDocuments, Commit", l.calls)
	}
	for i, g := range l.gets {
		if len(g.GetTransaction()) == 0 {
			t.Fatalf("read %d is not in the begun transaction: %v", i, g)
		}
	}
	if got := e.get(day); !model.Equal(got, in) {
		t.Fatal("read back differs from the input")
	}
}

func twoRoundTrips(t *testing.T, e *env) {
	l := &rpcLog{calls: map[string]int{}}
	in := gen(132, 1) // 3 chunks
	mustWrite(t, e.writer(WithAPIClient(loggedAPI(t, l))), day, in)
	if got := e.get(day); !model.Equal(got, in) {
		t.Fatal("read back differs from the input")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	want := map[string]int{"BatchGetDocuments": 3, "Commit": 3}
	if len(l.calls) != len(want) || l.calls["BatchGetDocuments"] != 3 || l.calls["Commit"] != 3 {
		t.Fatalf("API calls %v, want exactly %v", l.calls, want)
	}
	fence := e.clean.Collection(DefaultCollection).Doc(day).Collection(fenceCollection).Doc(fenceDocID).Path
	for i, g := range l.gets {
		rw := g.GetNewTransaction().GetReadWrite()
		if rw == nil || len(g.GetDocuments()) != 1 || g.GetDocuments()[0] != fence {
			t.Fatalf("read %d: %v, want the fence document alone, beginning a read-write transaction", i, g)
		}
	}
	for i, tid := range l.commits {
		if len(tid) == 0 {
			t.Fatalf("commit %d is not transactional", i)
		}
	}
}

// A chunk whose commit was aborted by contention is retried as a fresh
// transaction that names the aborted one, as the Firestore client's own
// retries do, so the server gives it priority.
func TestAbortedChunkRetriesWithHint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := &rpcLog{calls: map[string]int{}, abortFirst: true}
	in := gen(40, 2) // one chunk
	res := mustWrite(t, e.writer(WithAPIClient(loggedAPI(t, l))), day, in)
	if r := res.BatchResults[1]; r.RetryAttempts != 1 || r.AbortedRetries != 1 {
		t.Fatalf("chunk retried %d times (%d after ABORTED), want 1 (1)", r.RetryAttempts, r.AbortedRetries)
	}
	if got := e.get(day); !model.Equal(got, in) {
		t.Fatal("read back differs from the input")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.gets) != 2 {
		t.Fatalf("%d fence reads, want 2", len(l.gets))
	}
	if first := l.gets[0].GetNewTransaction().GetReadWrite().GetRetryTransaction(); first != nil {
		t.Fatalf("first attempt names a transaction to retry: %x", first)
	}
	hint := l.gets[1].GetNewTransaction().GetReadWrite().GetRetryTransaction()
	if len(l.aborted) == 0 || !bytes.Equal(hint, l.aborted) {
		t.Fatalf("retry names transaction %x, want the aborted one %x", hint, l.aborted)
	}
	// The retry reads the fence alone: the chunk's writes are sets and
	// deletes, which an attempt may repeat.
	if n := len(l.gets[1].GetDocuments()); n != 1 {
		t.Fatalf("retry read %d documents, want the fence alone", n)
	}
	if l.calls["Rollback"] != 1 {
		t.Fatalf("%d rollbacks, want 1: the aborted attempt's", l.calls["Rollback"])
	}
}
