package fsproxy_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	vkit "cloud.google.com/go/firestore/apiv1"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/iterator"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/internal/fsproxy"
)

var emu *emulator.Emulator

func TestMain(m *testing.M) { os.Exit(emulator.Main(m, &emu)) }

// start runs a proxy in front of the emulator until t ends.
func start(t *testing.T, cfg fsproxy.Config) *fsproxy.Proxy {
	t.Helper()
	emulator.SkipShort(t)
	return fsproxy.Start(t, emu.Host, cfg)
}

// through is the proxy as an emulator: clients dialled on it (with the
// emulator's credentials, option.WithGRPCConn) go through it.
func through(p *fsproxy.Proxy) *emulator.Emulator { return &emulator.Emulator{Host: p.Addr()} }

// noRetry turns off the API client's own retries (of RESOURCE_EXHAUSTED
// and UNAVAILABLE, for Commit), so a test sees every answer.
var noRetry = gax.WithRetry(func() gax.Retryer { return nil })

// committer commits raw writes on a project through a proxy, as the
// snapshot writer's chunks do.
type committer struct {
	api     *vkit.Client
	project string
	n       atomic.Int64
}

func newCommitter(t *testing.T, p *fsproxy.Proxy) *committer {
	return &committer{api: through(p).TestAPIClient(t), project: emulator.ProjectID(t)}
}

func (c *committer) name(path string) string {
	return "projects/" + c.project + "/databases/(default)/documents/" + path
}

// commit sets one field in each document of paths, in one commit.
func (c *committer) commit(ctx context.Context, paths ...string) error {
	req := &firestorepb.CommitRequest{Database: "projects/" + c.project + "/databases/(default)"}
	for _, path := range paths {
		req.Writes = append(req.Writes, &firestorepb.Write{Operation: &firestorepb.Write_Update{Update: &firestorepb.Document{
			Name:   c.name(path),
			Fields: map[string]*firestorepb.Value{"n": {ValueType: &firestorepb.Value_IntegerValue{IntegerValue: c.n.Add(1)}}},
		}}})
	}
	_, err := c.api.Commit(ctx, req, noRetry)
	return err
}

// districts returns n fresh paths in snapshots/2026-11-20/districts.
func (c *committer) districts(n int) []string {
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("snapshots/2026-11-20/districts/d%d", c.n.Add(1))
	}
	return paths
}

// wantStatus fails t unless err is a status of code with msg.
func wantStatus(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	if s := status.Convert(err); s.Code() != code || s.Message() != msg {
		t.Fatalf("got %v, want %v %q", err, code, msg)
	}
}

// TestPassThrough: the Go Firestore client, finding the proxy through
// FIRESTORE_EMULATOR_HOST as production code finds the emulator, works
// as on the emulator: writes, reads, a transaction, a query, a batch get,
// a listener, and the emulator's own errors.
func TestPassThrough(t *testing.T) {
	p := start(t, fsproxy.Config{})
	t.Setenv(emulator.HostEnv, p.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	project := emulator.ProjectID(t)
	c, err := firestore.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	col := c.Collection("snapshots").Doc("2026-11-20").Collection("districts")
	for i := range 5 {
		if _, err := col.Doc(fmt.Sprint("d", i)).Set(ctx, map[string]any{"i": i, "name": fmt.Sprint("district ", i)}); err != nil {
			t.Fatalf("Set: %v", err)
		}
	}
	snap, err := col.Doc("d3").Get(ctx)
	if err != nil || snap.Data()["name"] != "district 3" {
		t.Fatalf("Get = %v, %v", snap.Data(), err)
	}
	if _, err := col.Doc("missing").Get(ctx); status.Code(err) != codes.NotFound {
		t.Errorf("Get of a missing document: %v, want NotFound", err)
	}
	// The emulator's errors come through unchanged.
	if _, err := col.Doc("d0").Create(ctx, map[string]any{"i": 0}); status.Code(err) != codes.AlreadyExists {
		t.Errorf("Create of an existing document: %v, want AlreadyExists", err)
	}
	err = c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		s, err := tx.Get(col.Doc("d1"))
		if err != nil {
			return err
		}
		return tx.Update(col.Doc("d1"), []firestore.Update{{Path: "i", Value: s.Data()["i"].(int64) + 100}})
	})
	if err != nil {
		t.Fatalf("transaction: %v", err)
	}
	docs, err := col.Where("i", ">=", 3).OrderBy("i", firestore.Asc).Documents(ctx).GetAll()
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	var ids []string
	for _, d := range docs {
		ids = append(ids, d.Ref.ID)
	}
	if got := strings.Join(ids, ","); got != "d3,d4,d1" {
		t.Errorf("query i >= 3 = %s, want d3,d4,d1", got)
	}
	all, err := c.GetAll(ctx, []*firestore.DocumentRef{col.Doc("d1"), col.Doc("missing"), col.Doc("d4")})
	if err != nil {
		t.Fatalf("GetAll: %v", err)
	}
	if len(all) != 3 || all[0].Data()["i"] != int64(101) || all[1].Exists() || all[2].Data()["i"] != int64(4) {
		t.Errorf("GetAll = %v, %v, %v", all[0].Data(), all[1].Exists(), all[2].Data())
	}
	// Listen: a bidirectional stream.
	it := col.Doc("d2").Snapshots(ctx)
	ls, err := it.Next()
	if err != nil || ls.Data()["i"] != int64(2) {
		t.Fatalf("listener's first snapshot = %v, %v", ls, err)
	}
	it.Stop()
	// Checked without the proxy.
	direct := emu.TestClientFor(t, project)
	if s, err := direct.Collection("snapshots/2026-11-20/districts").Doc("d1").Get(ctx); err != nil || s.Data()["i"] != int64(101) {
		t.Errorf("d1 on the emulator = %v, %v", s.Data(), err)
	}
	st := p.Stats()
	// 5 sets, a failed create, the transaction's commit.
	if st.Commits != 7 || st.Accepted != 6 || st.Failed != 1 || st.Writes != 6 || len(st.Rejected) != 0 {
		t.Errorf("stats = %+v, want 7 commits, 6 accepted, 1 failed, 6 writes", st)
	}
	if d := st.Docs[col.Doc("d1").Path]; d.Writes != 2 || d.First.IsZero() || d.Last.Before(d.First) {
		t.Errorf("stats of d1 = %+v, want 2 writes", d)
	}
}

// fakeFirestore answers GetDocument, Commit and RunQuery with known
// headers, trailers and statuses, and records the metadata it got.
type fakeFirestore struct {
	firestorepb.UnimplementedFirestoreServer
	mu sync.Mutex
	md []metadata.MD
}

func (f *fakeFirestore) record(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	f.md = append(f.md, md)
	f.mu.Unlock()
}

func (f *fakeFirestore) GetDocument(ctx context.Context, req *firestorepb.GetDocumentRequest) (*firestorepb.Document, error) {
	f.record(ctx)
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-header", "h"))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "t"))
	if strings.HasSuffix(req.Name, "/missing") {
		s, _ := status.New(codes.NotFound, "no such document").WithDetails(&errdetails.ErrorInfo{Reason: "NOPE"})
		return nil, s.Err()
	}
	return &firestorepb.Document{Name: req.Name}, nil
}

func (f *fakeFirestore) Commit(ctx context.Context, req *firestorepb.CommitRequest) (*firestorepb.CommitResponse, error) {
	f.record(ctx)
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-header", "commit"))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "commit"))
	return &firestorepb.CommitResponse{WriteResults: make([]*firestorepb.WriteResult, len(req.Writes))}, nil
}

func (f *fakeFirestore) RunQuery(req *firestorepb.RunQueryRequest, ss firestorepb.Firestore_RunQueryServer) error {
	f.record(ss.Context())
	_ = ss.SetHeader(metadata.Pairs("x-header", "query"))
	for i := range 3 {
		if err := ss.Send(&firestorepb.RunQueryResponse{SkippedResults: int32(i)}); err != nil {
			return err
		}
	}
	ss.SetTrailer(metadata.Pairs("x-trailer", "query"))
	return status.Error(codes.ResourceExhausted, "out of reads")
}

// TestMetadataHeadersTrailersStatus: on a fake Firestore, the proxy
// forwards the request's metadata and returns headers, trailers, status
// and its details as the server sent them, for a unary call, a commit
// and a server stream.
func TestMetadataHeadersTrailersStatus(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeFirestore{}
	srv := grpc.NewServer()
	firestorepb.RegisterFirestoreServer(srv, fake)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	p, err := fsproxy.New(ln.Addr().String(), fsproxy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	conn, err := grpc.NewClient(p.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := firestorepb.NewFirestoreClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx,
		"authorization", "Bearer owner",
		"google-cloud-resource-prefix", "projects/p/databases/(default)",
		"x-goog-request-params", "name=projects%2Fp")

	var header, trailer metadata.MD
	doc, err := client.GetDocument(ctx, &firestorepb.GetDocumentRequest{Name: "projects/p/databases/(default)/documents/a/b"},
		grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil || doc.Name != "projects/p/databases/(default)/documents/a/b" {
		t.Fatalf("GetDocument = %v, %v", doc, err)
	}
	if header.Get("x-header")[0] != "h" || trailer.Get("x-trailer")[0] != "t" {
		t.Errorf("header %v, trailer %v", header, trailer)
	}
	_, err = client.GetDocument(ctx, &firestorepb.GetDocumentRequest{Name: "projects/p/databases/(default)/documents/a/missing"},
		grpc.Header(&header), grpc.Trailer(&trailer))
	s := status.Convert(err)
	if s.Code() != codes.NotFound || s.Message() != "no such document" || len(s.Details()) != 1 {
		t.Errorf("GetDocument of a missing document: %v (details %v)", err, s.Details())
	} else if info, ok := s.Details()[0].(*errdetails.ErrorInfo); !ok || info.Reason != "NOPE" {
		t.Errorf("details = %v", s.Details())
	}
	if len(trailer.Get("x-trailer")) == 0 {
		t.Errorf("error's trailer = %v", trailer)
	}

	if _, err := client.Commit(ctx, &firestorepb.CommitRequest{Writes: []*firestorepb.Write{{Operation: &firestorepb.Write_Delete{Delete: "projects/p/databases/(default)/documents/a/b"}}}},
		grpc.Header(&header), grpc.Trailer(&trailer)); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if header.Get("x-header")[0] != "commit" || trailer.Get("x-trailer")[0] != "commit" {
		t.Errorf("commit's header %v, trailer %v", header, trailer)
	}

	qc, err := client.RunQuery(ctx, &firestorepb.RunQueryRequest{Parent: "projects/p/databases/(default)/documents"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		r, err := qc.Recv()
		if err != nil {
			wantStatus(t, err, codes.ResourceExhausted, "out of reads")
			break
		}
		if r.SkippedResults != int32(n) {
			t.Errorf("message %d = %v", n, r)
		}
		n++
	}
	if h, _ := qc.Header(); n != 3 || h.Get("x-header")[0] != "query" || qc.Trailer().Get("x-trailer")[0] != "query" {
		t.Errorf("RunQuery: %d messages, header %v, trailer %v", n, h, qc.Trailer())
	}

	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.md) != 4 {
		t.Fatalf("fake saw %d calls, want 4", len(fake.md))
	}
	for _, md := range fake.md {
		for k, want := range map[string]string{
			"authorization":                "Bearer owner",
			"google-cloud-resource-prefix": "projects/p/databases/(default)",
			"x-goog-request-params":        "name=projects%2Fp",
		} {
			if got := md.Get(k); len(got) != 1 || got[0] != want {
				t.Errorf("fake got %s = %v, want [%s]", k, got, want)
			}
		}
	}
}

// TestRamp: concurrent commits of 10 districts outrunning a 100/s ramp
// that doubles every 2 s are refused with RESOURCE_EXHAUSTED, what gets
// through stays within the budget second by second, the budget steps up
// on schedule, and writes to another collection are neither counted nor
// refused.
func TestRamp(t *testing.T) {
	t.Parallel()
	const rate0, every = 100.0, 2 * time.Second
	p := start(t, fsproxy.Config{Ramp: fsproxy.Ramp{Collection: "districts", Start: rate0, Growth: 2, Every: every}})
	c := newCommitter(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if r := p.Rate(); r != 0 {
		t.Fatalf("Rate before any write = %v, want 0", r)
	}
	// Another collection does not rate0 the ramp.
	if err := c.commit(ctx, "snapshots/2026-11-20"); err != nil {
		t.Fatal(err)
	}
	if r := p.Rate(); r != 0 {
		t.Fatalf("Rate after a write elsewhere = %v, want 0", r)
	}
	before := time.Now()
	if err := c.commit(ctx, c.districts(10)...); err != nil {
		t.Fatalf("first district commit: %v", err)
	}
	after := time.Now()
	if r := p.Rate(); r != rate0 && time.Since(before) < every {
		t.Fatalf("Rate after the first write = %v, want %v", r, rate0)
	}

	// Load: 6 workers committing 10 districts as fast as they can, one
	// committing elsewhere, until the budget has stepped up twice.
	var (
		wg                        sync.WaitGroup
		stop                      atomic.Bool
		exhausted, other, errored atomic.Int64
		firstErr                  atomic.Pointer[error]
	)
	fail := func(err error) {
		errored.Add(1)
		firstErr.CompareAndSwap(nil, &err)
	}
	for range 6 {
		wg.Go(func() {
			for !stop.Load() {
				err := c.commit(ctx, c.districts(10)...)
				switch {
				case err == nil:
				case status.Code(err) == codes.ResourceExhausted && status.Convert(err).Message() == fsproxy.QuotaMessage:
					exhausted.Add(1)
				default:
					fail(err)
				}
			}
		})
	}
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			if err := c.commit(ctx, fmt.Sprintf("snapshots/2026-11-20/other/o%d", i%50)); err != nil {
				fail(err)
			}
			other.Add(1)
		}
	})
	// Watch the budget step: 200 at 2 s, 400 at 4 s after the first write.
	var at200, at400 time.Time
	for at400.IsZero() && ctx.Err() == nil {
		now := time.Now()
		switch r := p.Rate(); {
		case r == 2*rate0 && at200.IsZero():
			at200 = now
		case r == 4*rate0:
			at400 = now
		case r != rate0 && r != 2*rate0:
			t.Errorf("Rate = %v, want 100, 200 or 400", r)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // some load at 400/s
	stop.Store(true)
	wg.Wait()
	if errored.Load() > 0 {
		t.Fatalf("%d commits failed otherwise than RESOURCE_EXHAUSTED, first: %v", errored.Load(), *firstErr.Load())
	}
	if at200.IsZero() || at200.Before(before.Add(every)) || at400.Before(before.Add(2*every)) {
		t.Errorf("the budget stepped to 200 at %v, to 400 at %v after the first write; want ≥ 2 s, ≥ 4 s",
			at200.Sub(before), at400.Sub(before))
	}
	// Polled every 5 ms on a loaded machine: the step is seen late, never
	// early; 1 s late is generous.
	if at200.After(after.Add(every+time.Second)) || at400.After(after.Add(2*every+time.Second)) {
		t.Errorf("the budget stepped late: to 200 at %v, to 400 at %v after the first write", at200.Sub(before), at400.Sub(before))
	}

	s := p.Stats()
	t.Logf("stats: %d commits, %d accepted, rejected %v; ramp writes %d, peak %d/s; per second %v; other commits %d",
		s.Commits, s.Accepted, s.Rejected, s.RampWrites, s.PeakRampWrites, p.RampWritesPerSecond(), other.Load())
	if exhausted.Load() == 0 || int64(s.Rejected[fsproxy.CauseRamp]) != exhausted.Load() || s.Codes[codes.ResourceExhausted] != s.Rejected[fsproxy.CauseRamp] {
		t.Errorf("%d commits refused with RESOURCE_EXHAUSTED, stats %v %v: want some, and the same", exhausted.Load(), s.Rejected, s.Codes)
	}
	if s.Writes-s.RampWrites != int(other.Load())+1 {
		t.Errorf("%d writes not counted by the ramp, want the %d elsewhere", s.Writes-s.RampWrites, other.Load()+1)
	}
	// Any one second takes at most a full bucket plus a second's refill
	// at the highest rate it reached: 2×400 at the end, 2×100 in the
	// first second (to the ms, as the windows are).
	if s.PeakRampWrites > 2*4*rate0 || s.PeakRampWrites < int(rate0) {
		t.Errorf("PeakRampWrites = %d, want between %v and %v", s.PeakRampWrites, rate0, 2*4*rate0)
	}
	per := p.RampWritesPerSecond()
	if len(per) < 4 || per[0]+per[1] < int(rate0) {
		t.Errorf("RampWritesPerSecond = %v: want ≥ 4 seconds, ≥ 100 in the first two", per)
	}
	for i, n := range per {
		// The budget at the end of second i, as the proxy started it
		// between before and after.
		limit := rate0 * float64(int(1)<<((i+1)/2))
		if float64(n) > 2*limit+1 {
			t.Errorf("second %d took %d ramp writes, more than %v", i, n, 2*limit)
		}
	}
	if sum := 0; true {
		for _, n := range per {
			sum += n
		}
		if sum != s.RampWrites {
			t.Errorf("RampWritesPerSecond sums to %d, RampWrites = %d", sum, s.RampWrites)
		}
	}
}

// TestDocumentRate: commits to one document faster than DocRate are
// ABORTED with Firestore's contention message and do not reach the
// emulator; other documents are not affected.
func TestDocumentRate(t *testing.T) {
	t.Parallel()
	p := start(t, fsproxy.Config{DocRate: 2, DocBurst: 2})
	c := newCommitter(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	begin := time.Now()
	accepted, aborted := 0, 0
	for range 20 {
		err := c.commit(ctx, "locks/hot")
		switch {
		case err == nil:
			accepted++
		case status.Code(err) == codes.Aborted:
			wantStatus(t, err, codes.Aborted, fsproxy.ContentionMessage)
			aborted++
		default:
			t.Fatal(err)
		}
	}
	elapsed := time.Since(begin)
	if accepted < 2 || float64(accepted) > 2+2*elapsed.Seconds()+0.01 || aborted == 0 {
		t.Errorf("%d accepted, %d aborted in %v at 2/s with a burst of 2", accepted, aborted, elapsed)
	}
	// Another document takes its own burst meanwhile.
	for i := range 2 {
		if err := c.commit(ctx, "locks/cold"); err != nil {
			t.Errorf("write %d to another document: %v", i, err)
		}
	}
	// A commit naming the hot document with another is refused (or
	// accepted) whole.
	third := 0
	switch err := c.commit(ctx, "locks/hot", "locks/third"); status.Code(err) {
	case codes.Aborted:
		aborted++
	case codes.OK:
		accepted++
		third++
	default:
		t.Fatal(err)
	}
	// The hot document takes writes again once its bucket refills.
	for {
		err := c.commit(ctx, "locks/hot")
		if err == nil {
			accepted++
			break
		}
		if status.Code(err) != codes.Aborted || ctx.Err() != nil {
			t.Fatalf("waiting for the hot document: %v", err)
		}
		aborted++
		time.Sleep(20 * time.Millisecond)
	}
	s := p.Stats()
	hot := s.Docs[c.name("locks/hot")]
	if hot.Writes != accepted || s.Docs[c.name("locks/third")].Writes != third || s.Rejected[fsproxy.CauseDocumentRate] != aborted || s.Codes[codes.Aborted] != aborted {
		t.Errorf("stats %+v: want %d writes to the hot document, %d refusals", s, accepted, aborted)
	}
	// The peak is within a burst plus a second at the rate.
	if hot.Peak1s < 2 || hot.Peak1s > 4 {
		t.Errorf("hot document's Peak1s = %d, want 2..4", hot.Peak1s)
	}
	if cold := s.Docs[c.name("locks/cold")]; cold.Writes != 2 {
		t.Errorf("cold document's stats = %+v, want 2 writes", cold)
	}
}

// TestInject: injected faults, by collection, for a while, until
// cancelled, at a probability, and applied.
func TestInject(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel) // after the parallel subtests

	t.Run("collection", func(t *testing.T) {
		t.Parallel()
		p := start(t, fsproxy.Config{})
		c := newCommitter(t, p)
		p.Inject(fsproxy.Fault{Code: codes.ResourceExhausted, Collection: "districts"})
		if err := c.commit(ctx, "snapshots/2026-11-20/other/x"); err != nil {
			t.Errorf("commit elsewhere: %v", err)
		}
		err := c.commit(ctx, "snapshots/2026-11-20/other/y", "snapshots/2026-11-20/districts/d1")
		wantStatus(t, err, codes.ResourceExhausted, fsproxy.QuotaMessage)
		direct := emu.TestClientFor(t, c.project)
		if _, err := direct.Doc("snapshots/2026-11-20/other/y").Get(ctx); status.Code(err) != codes.NotFound {
			t.Errorf("a refused commit's document: %v, want NotFound", err)
		}
		s := p.Stats()
		if s.Commits != 2 || s.Accepted != 1 || s.Rejected[fsproxy.CauseInjected] != 1 || s.Codes[codes.ResourceExhausted] != 1 {
			t.Errorf("stats = %+v", s)
		}
	})

	t.Run("for", func(t *testing.T) {
		t.Parallel()
		p := start(t, fsproxy.Config{})
		c := newCommitter(t, p)
		const d = time.Second
		injected := time.Now()
		p.Inject(fsproxy.Fault{Code: codes.Unavailable, For: d})
		failed := 0
		for {
			err := c.commit(ctx, "a/b")
			if err == nil {
				// The proxy rules when the commit arrives, which may be
				// after it was sent: only an answer received before the
				// fault's end shows the fault ended early.
				if got := time.Since(injected); got < d {
					t.Errorf("a commit answered %v after a %v fault went through", got, d)
				}
				break
			}
			wantStatus(t, err, codes.Unavailable, fsproxy.UnavailableMessage)
			failed++
			time.Sleep(20 * time.Millisecond)
		}
		if failed == 0 {
			t.Error("no commit failed during the fault")
		}
	})

	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		p := start(t, fsproxy.Config{})
		c := newCommitter(t, p)
		cancelFault := p.Inject(fsproxy.Fault{Code: codes.Aborted})
		wantStatus(t, c.commit(ctx, "a/b"), codes.Aborted, fsproxy.ContentionMessage)
		wantStatus(t, c.commit(ctx, "a/b"), codes.Aborted, fsproxy.ContentionMessage)
		cancelFault()
		cancelFault()
		if err := c.commit(ctx, "a/b"); err != nil {
			t.Errorf("after cancel: %v", err)
		}
		if s := p.Stats(); s.Rejected[fsproxy.CauseInjected] != 2 || s.Accepted != 1 {
			t.Errorf("stats = %+v", s)
		}
	})

	t.Run("probability", func(t *testing.T) {
		t.Parallel()
		p := start(t, fsproxy.Config{})
		c := newCommitter(t, p)
		p.Inject(fsproxy.Fault{Code: codes.DeadlineExceeded, Probability: 0.5})
		const n = 100
		failed := 0
		for i := range n {
			err := c.commit(ctx, fmt.Sprintf("a/b%d", i))
			if err != nil {
				wantStatus(t, err, codes.DeadlineExceeded, fsproxy.DeadlineMessage)
				failed++
			}
		}
		// Binomial(100, 0.5): outside 25..75 once in ~10⁶ runs.
		if failed < 25 || failed > 75 {
			t.Errorf("%d of %d commits failed at probability 0.5", failed, n)
		}
		if s := p.Stats(); s.Accepted != n-failed || s.Rejected[fsproxy.CauseInjected] != failed {
			t.Errorf("stats = %+v, want %d accepted", s, n-failed)
		}
	})

	t.Run("applied", func(t *testing.T) {
		t.Parallel()
		p := start(t, fsproxy.Config{})
		c := newCommitter(t, p)
		p.Inject(fsproxy.Fault{Code: codes.DeadlineExceeded, Applied: true, Collection: "districts"})
		err := c.commit(ctx, "snapshots/2026-11-20/districts/d7")
		wantStatus(t, err, codes.DeadlineExceeded, fsproxy.DeadlineMessage)
		direct := emu.TestClientFor(t, c.project)
		if snap, err := direct.Doc("snapshots/2026-11-20/districts/d7").Get(ctx); err != nil || !snap.Exists() {
			t.Errorf("the applied commit's document: %v, %v; want it there", snap, err)
		}
		s := p.Stats()
		if s.Accepted != 1 || s.Writes != 1 || s.Rejected[fsproxy.CauseInjected] != 1 || s.Codes[codes.DeadlineExceeded] != 1 {
			t.Errorf("stats = %+v", s)
		}
	})
}

// TestLatency: every call waits the latency before it is forwarded.
func TestLatency(t *testing.T) {
	t.Parallel()
	const d = 300 * time.Millisecond
	p := start(t, fsproxy.Config{Latency: d})
	c := through(p).TestClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, call := range []struct {
		name string
		do   func() error
	}{
		{"commit", func() error { _, err := c.Doc("a/b").Set(ctx, map[string]any{"x": 1}); return err }},
		{"get", func() error { _, err := c.Doc("a/b").Get(ctx); return err }},
		{"query", func() error {
			_, err := c.Collection("a").Documents(ctx).Next()
			if errors.Is(err, iterator.Done) {
				return nil
			}
			return err
		}},
	} {
		begin := time.Now()
		if err := call.do(); err != nil {
			t.Fatalf("%s: %v", call.name, err)
		}
		if took := time.Since(begin); took < d {
			t.Errorf("%s took %v with %v of latency", call.name, took, d)
		}
	}
	p.SetLatency(0)
	begin := time.Now()
	if _, err := c.Doc("a/b").Get(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took >= 10*d {
		t.Logf("a get without latency took %v (a loaded machine?)", took)
	}
}

// TestClose: Close is idempotent and gives its port back; New refuses a
// nonsensical Config. Not parallel: a proxy another test starts
// meanwhile may be given the port just freed (it happened), and a dial
// would then reach that one; the port is checked by listening on it.
func TestClose(t *testing.T) {
	emulator.SkipShort(t)
	p, err := fsproxy.New(emu.Host, fsproxy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	p.Close()
	l, err := net.Listen("tcp", p.Addr())
	if err != nil {
		t.Errorf("the proxy's port is not free after Close: %v", err)
	} else {
		l.Close()
	}
	if _, err := fsproxy.New(emu.Host, fsproxy.Config{DocRate: -1}); err == nil {
		t.Error("New accepted DocRate -1")
	}
}
