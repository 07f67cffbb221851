package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	vkit "cloud.google.com/go/firestore/apiv1"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// rpcTap records every RPC made on the connections it is dialled into,
// unary and streaming, with what it read, wrote and which transaction it
// belonged to, so that a write's RPCs can be told apart by what they did
// (classify), whatever code made them.
type rpcTap struct {
	mu    sync.Mutex
	calls []*rpcCall
}

// rpcCall is one RPC as the tap saw it.
type rpcCall struct {
	conn       string // which of the write's connections: "lock", "client", "api"
	method     string // the RPC's name, e.g. "Commit"
	start, end time.Time
	tid        string   // the transaction it ran in, began or committed ("" outside one)
	newTx      bool     // it began its transaction (BatchGetDocuments or RunQuery with new_transaction)
	docs       []string // documents it read
	query      string   // the collection id it queried
	writes     []*pb.Write
	err        error
}

// dial is a connection to the emulator (as emulator.Dial makes one) that
// the tap records on under name.
func (tp *rpcTap) dial(t *testing.T, name string) *grpc.ClientConn {
	t.Helper()
	emulator.SkipShort(t)
	conn, err := grpc.NewClient(emu.Host,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(emulatorOwner{}),
		grpc.WithChainUnaryInterceptor(tp.unary(name)),
		grpc.WithChainStreamInterceptor(tp.stream(name)))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func (tp *rpcTap) add(c *rpcCall) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.calls = append(tp.calls, c)
}

func (tp *rpcTap) unary(conn string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		c := &rpcCall{conn: conn, method: path.Base(method), start: time.Now()}
		err := invoker(ctx, method, req, reply, cc, opts...)
		c.end, c.err = time.Now(), err
		switch r := req.(type) {
		case *pb.CommitRequest:
			// Read back from the wire form: the writer sends fields as
			// unknown (wire.go), which only a decode makes readable.
			var sent pb.CommitRequest
			if b, err := proto.Marshal(r); err == nil && proto.Unmarshal(b, &sent) == nil {
				r = &sent
			}
			c.tid, c.writes = string(r.GetTransaction()), r.GetWrites()
		case *pb.RollbackRequest:
			c.tid = string(r.GetTransaction())
		case *pb.BeginTransactionRequest:
			if b, ok := reply.(*pb.BeginTransactionResponse); ok {
				c.tid = string(b.GetTransaction())
			}
		case *pb.GetDocumentRequest:
			c.docs = []string{r.GetName()}
			c.tid = string(r.GetTransaction())
		}
		tp.add(c)
		return err
	}
}

func (tp *rpcTap) stream(conn string) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		c := &rpcCall{conn: conn, method: path.Base(method), start: time.Now()}
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			c.end, c.err = time.Now(), err
			tp.add(c)
			return nil, err
		}
		return &tappedStream{ClientStream: s, tap: tp, c: c}, nil
	}
}

// tappedStream records a streaming call's request, the transaction its
// answers name, and when it ended.
type tappedStream struct {
	grpc.ClientStream
	tap  *rpcTap
	c    *rpcCall
	once sync.Once
}

func (s *tappedStream) SendMsg(m any) error {
	switch r := m.(type) {
	case *pb.BatchGetDocumentsRequest:
		s.c.docs = r.GetDocuments()
		s.c.tid = string(r.GetTransaction())
		s.c.newTx = r.GetNewTransaction() != nil
	case *pb.RunQueryRequest:
		if from := r.GetStructuredQuery().GetFrom(); len(from) > 0 {
			s.c.query = from[0].GetCollectionId()
		}
		s.c.tid = string(r.GetTransaction())
		s.c.newTx = r.GetNewTransaction() != nil
	}
	return s.ClientStream.SendMsg(m)
}

func (s *tappedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	switch r := m.(type) {
	case *pb.BatchGetDocumentsResponse:
		if len(r.GetTransaction()) > 0 {
			s.c.tid = string(r.GetTransaction())
		}
	case *pb.RunQueryResponse:
		if len(r.GetTransaction()) > 0 {
			s.c.tid = string(r.GetTransaction())
		}
	}
	if err != nil {
		s.once.Do(func() {
			s.c.end = time.Now()
			if !errors.Is(err, io.EOF) {
				s.c.err = err
			}
			s.tap.add(s.c)
		})
	}
	return err
}

// Classes of a write's RPCs (classify).
const (
	rpcAcquire = "lock acquire"
	rpcRoot    = "root transaction"
	rpcStale   = "stale-district query"
	rpcPages   = "manifest-page query"
	rpcFinish  = "finish"
	rpcRelease = "lock release"
	rpcChunk   = "chunk"
	rpcRecord  = "record"
	rpcExtend  = "lease renewal"
	// rpcAbandoned: an RPC cancelled before it did anything, or a
	// transaction rolled back without a commit, as the recorder's record
	// in flight is when the chunks are done.
	rpcAbandoned = "abandoned"
	rpcOther     = "other"
)

// fixedClass reports whether RPCs of class cl are a write's fixed cost,
// whatever its size: neither a chunk's nor in the background.
func fixedClass(cl string) bool {
	return cl != rpcChunk && cl != rpcRecord && cl != rpcExtend && cl != rpcAbandoned
}

// classify names what each of calls did, from what its transaction wrote
// (or, with no writes, read): every RPC of a transaction gets its
// transaction's class.
func classify(calls []*rpcCall) map[*rpcCall]string {
	byTx := map[string][]*rpcCall{}
	for _, c := range calls {
		if c.tid != "" {
			byTx[c.tid] = append(byTx[c.tid], c)
		}
	}
	ofWrites := func(ws []*pb.Write) string {
		for _, w := range ws {
			name := w.GetDelete()
			if u := w.GetUpdate(); u != nil {
				name = u.GetName()
			}
			segs := strings.Split(name[strings.Index(name, "/documents/")+len("/documents/"):], "/")
			switch {
			case segs[0] == firestorelock.DefaultLockCollection && w.GetDelete() != "":
				return rpcRelease
			case segs[0] == firestorelock.DefaultLockCollection && w.GetUpdateMask() != nil:
				return rpcExtend
			case segs[0] == firestorelock.DefaultLockCollection:
				return rpcAcquire
			case len(segs) == 4 && segs[2] == "districts":
				return rpcChunk
			case len(segs) == 2 && w.GetUpdateMask() == nil:
				return rpcRoot
			case len(segs) == 2:
				state := w.GetUpdate().GetFields()["metadata"].GetMapValue().GetFields()["writeState"].GetStringValue()
				if state == layout.StateFinished {
					return rpcFinish
				}
				return rpcRecord
			}
		}
		return ""
	}
	ofReads := func(c *rpcCall) string {
		if status.Code(c.err) == codes.Canceled && c.tid == "" {
			return rpcAbandoned
		}
		switch c.query {
		case "districts":
			return rpcStale
		case layout.PagesCollection:
			return rpcPages
		}
		for _, d := range c.docs {
			if strings.Contains(d, "/documents/"+firestorelock.DefaultLockCollection+"/") {
				return rpcAcquire // a lock read that changed nothing
			}
		}
		return rpcOther
	}
	out := map[*rpcCall]string{}
	for _, c := range calls {
		if cl := ofWrites(c.writes); cl != "" {
			out[c] = cl
			continue
		}
		if c.tid != "" {
			for _, o := range byTx[c.tid] {
				if cl := ofWrites(o.writes); cl != "" {
					out[c] = cl
				}
			}
			if out[c] != "" {
				continue
			}
			// A transaction cut off before its commit: its RPCs were
			// cancelled, or it was rolled back (a read that began it is
			// never cancelled, package fstx: an attempt given up mid-read
			// leaves it to finish and roll the transaction back), as the
			// recorder's record in flight is when the chunks are done.
			if slices.ContainsFunc(byTx[c.tid], func(o *rpcCall) bool {
				return status.Code(o.err) == codes.Canceled || o.method == "Rollback"
			}) {
				out[c] = rpcAbandoned
				continue
			}
		}
		out[c] = ofReads(c)
	}
	return out
}

// rpcCount is the RPCs of one write, by class and method, and its fixed
// RPCs' round trips: the fixed RPCs grouped by overlap in time, each group
// costing one round trip of latency.
type rpcCount struct {
	byClass map[string]map[string]int
	serial  int
}

func (tp *rpcTap) count() rpcCount {
	tp.mu.Lock()
	calls := slices.Clone(tp.calls)
	tp.mu.Unlock()
	cls := classify(calls)
	n := rpcCount{byClass: map[string]map[string]int{}}
	var fixed []*rpcCall
	for _, c := range calls {
		cl := cls[c]
		if n.byClass[cl] == nil {
			n.byClass[cl] = map[string]int{}
		}
		n.byClass[cl][c.method]++
		if fixedClass(cl) {
			fixed = append(fixed, c)
		}
	}
	// The most fixed RPCs that ran one after another: each is a round
	// trip of latency (interval scheduling: earliest end first).
	sort.Slice(fixed, func(a, b int) bool { return fixed[a].end.Before(fixed[b].end) })
	var last time.Time
	for _, c := range fixed {
		if last.IsZero() || c.start.After(last) {
			n.serial++
			last = c.end
		}
	}
	return n
}

// total is the RPCs of the classes for which keep is true.
func (n rpcCount) total(keep func(string) bool) int {
	t := 0
	for cl, m := range n.byClass {
		if keep(cl) {
			for _, k := range m {
				t += k
			}
		}
	}
	return t
}

func (n rpcCount) String() string {
	var b strings.Builder
	classes := make([]string, 0, len(n.byClass))
	for cl := range n.byClass {
		classes = append(classes, cl)
	}
	sort.Strings(classes)
	for _, cl := range classes {
		methods := make([]string, 0, len(n.byClass[cl]))
		for m, k := range n.byClass[cl] {
			methods = append(methods, fmt.Sprintf("%s %d", m, k))
		}
		sort.Strings(methods)
		fmt.Fprintf(&b, "  %-22s %s\n", cl, strings.Join(methods, ", "))
	}
	fmt.Fprintf(&b, "  fixed RPCs %d in %d round trips; chunk RPCs %d; background RPCs %d",
		n.total(fixedClass), n.serial, n.total(func(cl string) bool { return cl == rpcChunk }),
		n.total(func(cl string) bool { return !fixedClass(cl) && cl != rpcChunk }))
	return b.String()
}

// roundTripEnv is a writer whose every connection — its Firestore client,
// its API client and its Firestore lock backend's own client — the tap
// records on.
func roundTripEnv(t *testing.T, tp *rpcTap) (*Writer, *firestore.Client) {
	t.Helper()
	ctx := context.Background()
	project := fmt.Sprintf("t-roundtrips-%d", time.Now().UnixNano())
	client, err := firestore.NewClient(ctx, project, option.WithGRPCConn(tp.dial(t, "client")), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	api, err := vkit.NewClient(ctx, option.WithGRPCConn(tp.dial(t, "api")), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Close() })
	lockClient, err := firestore.NewClient(ctx, project, option.WithGRPCConn(tp.dial(t, "lock")), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lockClient.Close() })
	// As the command's lock (writeLocker): its transactions on an API
	// client of its own, begun by their reads (firestorelock.WithAPIClient).
	lockAPI, err := vkit.NewClient(ctx, option.WithGRPCConn(tp.dial(t, "lock")), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lockAPI.Close() })
	locker, err := firestorelock.New(lockClient, firestorelock.WithAPIClient(lockAPI))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locker.Close() })
	w, err := NewWriter(client, locker, WithAPIClient(api), WithLockWait(0))
	if err != nil {
		t.Fatal(err)
	}
	return w, client
}

// A fresh write of the application's size (132 districts: three chunks)
// makes its fixed RPCs — the lock's acquisition and release, the root
// transaction, the stale-district query, the finish — in at most 8 round
// trips (14 before every one of the four transactions was begun by its
// read, 10 with the lock's on the client's RunTransaction); the RPCs by
// class and method are logged (docs/how-a-write-works.md quotes them).
func TestFreshWriteRoundTrips(t *testing.T) {
	t.Parallel()
	tp := &rpcTap{}
	w, _ := roundTripEnv(t, tp)
	ctx := context.Background()
	snap := model.Generate(day, 132, 1)
	res, err := w.Write(ctx, day, snap)
	if err != nil || res.Outcome != OutcomeComplete {
		t.Fatalf("write: %v (%+v)", err, res)
	}
	n := tp.count()
	t.Logf("fresh 132-district write:\n%s", n)
	tp.mu.Lock()
	cls := classify(tp.calls)
	for _, c := range tp.calls {
		if cls[c] == rpcOther {
			t.Logf("other: %s %s tid=%q err=%v", c.conn, c.method, c.tid, c.err)
		}
	}
	tp.mu.Unlock()
	if got := n.byClass[rpcChunk]; got["Commit"] != 3 {
		t.Errorf("chunk commits %d, want 3", got["Commit"])
	}
	// Each fixed step's transaction is begun by its read: a read and a
	// commit. The listings run beside the root transaction's read.
	for _, cl := range []string{rpcAcquire, rpcRoot, rpcFinish, rpcRelease} {
		if got := n.byClass[cl]; len(got) != 2 || got["BatchGetDocuments"] != 1 || got["Commit"] != 1 {
			t.Errorf("%s: %v, want BatchGetDocuments 1, Commit 1", cl, got)
		}
	}
	if n.serial > 8 {
		t.Errorf("fixed RPCs take %d round trips, want at most 8", n.serial)
	}
}
