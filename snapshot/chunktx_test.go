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

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// rpcLog records the Firestore API calls of a client, unary and
// streaming, each with the transaction it belongs to, so that a test can
// tell the calls of the district chunks' transactions from the root
// transaction's and the finish's, which run on the same client.
type rpcLog struct {
	mu     sync.Mutex
	events []*rpcEvent
	// abortFirst, if set, refuses the first Commit of a district chunk
	// with ABORTED before it reaches the emulator (contention).
	abortFirst bool
	aborted    []byte // the transaction of the refused Commit
}

// rpcEvent is one call: its method, its transaction (as the request names
// it, or as the answer of the call that began it gives it), and the
// request of a read or a commit.
type rpcEvent struct {
	method string
	tid    []byte
	get    *firestorepb.BatchGetDocumentsRequest
	commit *firestorepb.CommitRequest
}

// writesDistricts reports whether commit c writes a district document:
// what only a district chunk's commit does.
func writesDistricts(c *firestorepb.CommitRequest) bool {
	for _, w := range c.GetWrites() {
		name := w.GetUpdate().GetName()
		if name == "" {
			name = w.GetDelete()
		}
		if path.Base(path.Dir(name)) == "districts" {
			return true
		}
	}
	return false
}

func (l *rpcLog) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	e := &rpcEvent{method: path.Base(method)}
	l.mu.Lock()
	l.events = append(l.events, e)
	switch r := req.(type) {
	case *firestorepb.CommitRequest:
		e.tid, e.commit = r.GetTransaction(), r
		if l.abortFirst && l.aborted == nil && writesDistricts(r) {
			l.aborted = r.GetTransaction()
			l.mu.Unlock()
			return status.Error(codes.Aborted, "injected contention")
		}
	case *firestorepb.RollbackRequest:
		e.tid = r.GetTransaction()
	}
	l.mu.Unlock()
	err := invoker(ctx, method, req, reply, cc, opts...)
	if r, ok := reply.(*firestorepb.BeginTransactionResponse); ok && err == nil {
		l.mu.Lock()
		e.tid = r.GetTransaction()
		l.mu.Unlock()
	}
	return err
}

func (l *rpcLog) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	e := &rpcEvent{method: path.Base(method)}
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
	s, err := streamer(ctx, desc, cc, method, opts...)
	return &loggedStream{ClientStream: s, log: l, e: e}, err
}

type loggedStream struct {
	grpc.ClientStream
	log *rpcLog
	e   *rpcEvent
}

func (s *loggedStream) SendMsg(m any) error {
	s.log.mu.Lock()
	switch r := m.(type) {
	case *firestorepb.BatchGetDocumentsRequest:
		s.e.get, s.e.tid = r, r.GetTransaction()
	case *firestorepb.RunQueryRequest:
		s.e.tid = r.GetTransaction()
	}
	s.log.mu.Unlock()
	return s.ClientStream.SendMsg(m)
}

func (s *loggedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if r, ok := m.(*firestorepb.BatchGetDocumentsResponse); ok && err == nil && len(r.GetTransaction()) > 0 {
		s.log.mu.Lock()
		s.e.tid = r.GetTransaction()
		s.log.mu.Unlock()
	}
	return err
}

// chunks is what the log holds of the district chunks' transactions —
// those whose commit writes district documents (the root transaction's,
// the finish's and the listings are left out): the number of calls by
// method, the reads in order, and the commits' transactions.
func (l *rpcLog) chunks() (calls map[string]int, gets []*firestorepb.BatchGetDocumentsRequest, commits [][]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	chunk := map[string]bool{}
	for _, e := range l.events {
		if e.commit != nil && writesDistricts(e.commit) {
			chunk[string(e.tid)] = true
		}
	}
	calls = map[string]int{}
	for _, e := range l.events {
		if len(e.tid) == 0 || !chunk[string(e.tid)] {
			continue
		}
		calls[e.method]++
		if e.get != nil {
			gets = append(gets, e.get)
		}
		if e.commit != nil {
			commits = append(commits, e.tid)
		}
	}
	return calls, gets, commits
}

// loggedAPI is an API client on the emulator whose every call l records.
func loggedAPI(t *testing.T, l *rpcLog) *vkit.Client {
	t.Helper()
	emulator.SkipShort(t)
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
	l := &rpcLog{}
	in := gen(132, 1) // 3 chunks
	mustWrite(t, e.writer(WithAPIClient(loggedAPI(t, l)), WithInlineBegin(false)), day, in)
	calls, gets, _ := l.chunks()
	if len(calls) != 3 || calls["BeginTransaction"] != 3 || calls["BatchGetDocuments"] != 3 || calls["Commit"] != 3 {
		t.Fatalf("the chunks' API calls %v, want 3 each of BeginTransaction, BatchGetDocuments, Commit", calls)
	}
	for i, g := range gets {
		if len(g.GetTransaction()) == 0 {
			t.Fatalf("read %d is not in the begun transaction: %v", i, g)
		}
	}
	if got := e.get(day); !model.Equal(got, in) {
		t.Fatal("read back differs from the input")
	}
}

func twoRoundTrips(t *testing.T, e *env) {
	l := &rpcLog{}
	in := gen(132, 1) // 3 chunks
	mustWrite(t, e.writer(WithAPIClient(loggedAPI(t, l))), day, in)
	if got := e.get(day); !model.Equal(got, in) {
		t.Fatal("read back differs from the input")
	}
	calls, gets, commits := l.chunks()
	want := map[string]int{"BatchGetDocuments": 3, "Commit": 3}
	if len(calls) != len(want) || calls["BatchGetDocuments"] != 3 || calls["Commit"] != 3 {
		t.Fatalf("the chunks' API calls %v, want exactly %v", calls, want)
	}
	fence := e.clean.Collection(DefaultCollection).Doc(day).Collection(layout.FenceCollection).Doc(layout.FenceDocID).Path
	for i, g := range gets {
		rw := g.GetNewTransaction().GetReadWrite()
		if rw == nil || len(g.GetDocuments()) != 1 || g.GetDocuments()[0] != fence {
			t.Fatalf("read %d: %v, want the fence document alone, beginning a read-write transaction", i, g)
		}
	}
	for i, tid := range commits {
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
	l := &rpcLog{abortFirst: true}
	in := gen(40, 2) // one chunk
	res := mustWrite(t, e.writer(WithAPIClient(loggedAPI(t, l))), day, in)
	if r := res.BatchResults[1]; r.RetryAttempts != 1 || r.AbortedRetries != 1 {
		t.Fatalf("chunk retried %d times (%d after ABORTED), want 1 (1)", r.RetryAttempts, r.AbortedRetries)
	}
	if got := e.get(day); !model.Equal(got, in) {
		t.Fatal("read back differs from the input")
	}
	calls, gets, _ := l.chunks()
	if len(gets) != 2 {
		t.Fatalf("%d fence reads, want 2", len(gets))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if first := gets[0].GetNewTransaction().GetReadWrite().GetRetryTransaction(); first != nil {
		t.Fatalf("first attempt names a transaction to retry: %x", first)
	}
	hint := gets[1].GetNewTransaction().GetReadWrite().GetRetryTransaction()
	if len(l.aborted) == 0 || !bytes.Equal(hint, l.aborted) {
		t.Fatalf("retry names transaction %x, want the aborted one %x", hint, l.aborted)
	}
	// The retry reads the fence alone: the chunk's writes are sets and
	// deletes, which an attempt may repeat.
	if n := len(gets[1].GetDocuments()); n != 1 {
		t.Fatalf("retry read %d documents, want the fence alone", n)
	}
	if calls["Rollback"] != 1 {
		t.Fatalf("%d rollbacks of the chunk's transactions, want 1: the aborted attempt's", calls["Rollback"])
	}
}
