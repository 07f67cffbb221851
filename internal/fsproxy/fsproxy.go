// Package fsproxy is an in-process gRPC proxy in front of the Firestore
// emulator that makes it answer as production Firestore does under load:
// a ramp budget for a new key range (Firestore's "500/50/5": 500 document
// writes/s, 50 % more every 5 minutes), a sustained write rate per
// document, added latency and injected errors. Beyond Commit it forwards
// every Firestore method unchanged, byte for byte, streams included, so
// the Firestore client works through it as through the emulator. Tests,
// the chaos suite and benchmarks point a client at Addr instead of the
// emulator; only tests import it.
//
//	p, err := fsproxy.New(emu.Host, fsproxy.Config{
//		Ramp:    fsproxy.Ramp{Collection: "districts", Start: 500}, // 500/50/5
//		DocRate: 1, DocBurst: 5,                                     // ~1 write/s a document
//	})
//	defer p.Close()
//	t.Setenv("FIRESTORE_EMULATOR_HOST", p.Addr())
//	cancel := p.Inject(fsproxy.Fault{Code: codes.ResourceExhausted, For: time.Second})
//	cancel()                                   // or let For pass
//	p.Inject(fsproxy.Fault{Code: codes.DeadlineExceeded, Applied: true}) // applied, answered an error
//	s := p.Stats()                             // s.PeakRampWrites, s.Rejected["ramp"], s.Docs[name].Peak1s
//
// Commit (/google.firestore.v1.Firestore/Commit) is where it decides: the
// documents a commit's writes touch are checked against, in order, the
// injected faults, the per-document rate and the ramp; a refusal is
// answered with Firestore's status without forwarding the commit, and
// spends no budget. BatchWrite and the other methods pass through.
package fsproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// CommitMethod is the full gRPC name of the method the proxy rules on.
const CommitMethod = "/google.firestore.v1.Firestore/Commit"

// Config is the store's shape; the zero Config forwards everything
// unchanged.
type Config struct {
	// Ramp is the budget for a new key range.
	Ramp Ramp
	// DocRate is the sustained writes per second any one document accepts
	// (0: no limit); DocBurst how many writes beyond the rate it takes at
	// once (a token bucket; 0 means 1). A commit writes each of its
	// documents once. Over it: ABORTED "Too much contention on these
	// documents. Please try again."
	DocRate  float64
	DocBurst int
	// Latency is added to every RPC, before it is forwarded (to a stream,
	// before its first message).
	Latency time.Duration
}

// Ramp is Firestore's budget for a new key range: Start document writes/s,
// ×Growth every Every, at most Max (0: no cap). Start 0: no budget.
//
// It counts only writes to documents whose parent collection id is
// Collection ("districts": every snapshots/{date}/districts/* together,
// one budget for the collection group); "" counts every write. The ramp's
// clock starts at the first counted write. A commit whose counted writes
// do not fit in the token bucket (capacity: one second of the current
// rate, and a commit larger than that fits a full bucket, leaving it in
// debt) is refused with RESOURCE_EXHAUSTED "Quota exceeded.".
type Ramp struct {
	Collection string
	Start      float64
	Growth     float64       // 0 means 1.5
	Every      time.Duration // 0 means 5 * time.Minute
	Max        float64
}

// Fault is an error injected into commits.
type Fault struct {
	// Code is the status: ResourceExhausted, Aborted, DeadlineExceeded,
	// Unavailable, …
	Code codes.Code
	// Message is the status message; "" gives Firestore's usual message
	// for Code.
	Message string
	// For is how long the fault lasts from Inject; 0: until cancelled.
	For time.Duration
	// Probability is the chance of each matching commit failing; 0 means
	// 1 (every one).
	Probability float64
	// Collection restricts the fault to commits writing a document whose
	// parent collection id is this; "" matches every commit.
	Collection string
	// Applied forwards the commit first and answers Code after the target
	// applied it: a commit whose outcome the client cannot know.
	Applied bool
}

// Stats counts what the proxy decided since New.
type Stats struct {
	// Commits is the Commit calls seen.
	Commits int
	// Accepted is the commits forwarded and answered OK by the target
	// (applied faults included: the target took them).
	Accepted int
	// Failed is the commits forwarded and answered an error by the target
	// (a precondition, a transaction the emulator aborted, …).
	Failed int
	// Rejected counts refusals by cause: CauseInjected ("injected",
	// applied faults included), CauseDocumentRate ("document-rate"),
	// CauseRamp ("ramp").
	Rejected map[string]int
	// Codes counts refusals by code.
	Codes map[codes.Code]int
	// Writes is the document writes in accepted commits.
	Writes int
	// RampWrites is, of them, those the ramp counts.
	RampWrites int
	// PeakRampWrites is the most ramp-counted writes accepted in any
	// one-second window (sliding, to the ms; a commit counts at the moment
	// it was decided on).
	PeakRampWrites int
	// Docs holds, per document name, its accepted writes.
	Docs map[string]DocStats
}

// DocStats is the accepted writes of one document.
type DocStats struct {
	// Writes is how many.
	Writes int
	// Peak1s is the most in any one-second window.
	Peak1s int
	// First and Last are the first and last accepted write.
	First, Last time.Time
}

// Proxy is a gRPC server that forwards Firestore's methods to a target
// and rules on commits. Its methods are safe for concurrent use.
type Proxy struct {
	ln      net.Listener
	srv     *grpc.Server
	conn    *grpc.ClientConn
	latency atomic.Int64 // ns

	mu   sync.Mutex
	core *core

	closeOnce sync.Once
}

// New starts a proxy on 127.0.0.1 (a free port) that forwards to target
// (host:port, the emulator), shaped by cfg and faultless beyond it.
func New(target string, cfg Config) (*Proxy, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(
			grpc.ForceCodec(rawCodec{}),
			grpc.MaxCallRecvMsgSize(math.MaxInt32),
			grpc.MaxCallSendMsgSize(math.MaxInt32),
		),
	)
	if err != nil {
		return nil, fmt.Errorf("fsproxy: dialing %s: %w", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	p := &Proxy{ln: ln, conn: conn, core: newCore(cfg, time.Now())}
	p.latency.Store(int64(cfg.Latency))
	p.srv = grpc.NewServer(
		grpc.ForceServerCodec(rawCodec{}),
		grpc.UnknownServiceHandler(p.handle),
		grpc.MaxRecvMsgSize(math.MaxInt32),
		grpc.MaxSendMsgSize(math.MaxInt32),
	)
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (c Config) check() error {
	r := c.Ramp
	switch {
	case c.DocRate < 0, c.DocBurst < 0, c.Latency < 0:
		return errors.New("fsproxy: DocRate, DocBurst and Latency must not be negative")
	case r.Start < 0, r.Growth < 0, r.Every < 0, r.Max < 0:
		return errors.New("fsproxy: Ramp's Start, Growth, Every and Max must not be negative")
	}
	return nil
}

// Addr is the proxy's host:port: what FIRESTORE_EMULATOR_HOST names.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops the server, ending every call in flight, and closes the
// connection to the target. It is idempotent.
func (p *Proxy) Close() {
	p.closeOnce.Do(func() {
		p.srv.Stop()
		_ = p.conn.Close()
	})
}

// SetLatency sets the delay added to every RPC from now on; 0 removes it.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(max(d, 0))) }

// Inject adds a fault until cancel is called (or Fault.For passes).
// Faults are tried in the order injected; the first that matches a commit
// (and strikes, by its Probability) answers it. cancel is idempotent.
func (p *Proxy) Inject(f Fault) (cancel func()) {
	p.mu.Lock()
	id := p.core.inject(f, time.Now())
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.core.cancel(id)
	}
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.core.snapshot()
}

// Rate returns the ramp budget now (writes/s), 0 when there is none or it
// has not started.
func (p *Proxy) Rate() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.core.ramp.rateAt(time.Now())
}

// SetRate holds the ramp's budget at v writes/s from now on, whatever its
// schedule (the bucket holds one second of v): a store whose capacity
// drops mid-write, and with a higher v recovers. v 0 returns the budget
// to the schedule. A Proxy without a Ramp budgets nothing, and SetRate
// changes nothing then.
func (p *Proxy) SetRate(v float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.core.ramp.on() {
		p.core.ramp.hold(time.Now(), max(v, 0))
	}
}

// PeakRampWritesOver returns the most ramp-counted writes accepted in any
// window of length d (sliding, to the ms): Stats.PeakRampWrites for a
// window other than a second. Over a few seconds it measures a writer's
// pace without the sub-second bunching a loaded machine's scheduling adds.
func (p *Proxy) PeakRampWritesOver(d time.Duration) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.core.rampW.peak(d)
}

// RampWritesPerSecond returns the accepted ramp-counted writes in each
// whole second since the first of them (by the moment each commit was
// decided on), for benchmark tables.
func (p *Proxy) RampWritesPerSecond() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.core.rampW.perSecond()
}

// handle forwards one call of any method: a Commit through commit, every
// other as a stream, whatever its shape.
func (p *Proxy) handle(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "fsproxy: no method name")
	}
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	md, _ := metadata.FromIncomingContext(ctx)
	md = md.Copy()
	delete(md, ":authority") // the target's, set by the client connection
	ctx = metadata.NewOutgoingContext(ctx, md)
	if d := time.Duration(p.latency.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	if method == CommitMethod {
		return p.commit(ctx, ss)
	}
	return p.stream(ctx, cancel, ss, method)
}

// commit rules on a Commit and forwards it when the rules let it through.
func (p *Proxy) commit(ctx context.Context, ss grpc.ServerStream) error {
	var req frame
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	var cr firestorepb.CommitRequest
	if err := proto.Unmarshal(req, &cr); err != nil {
		return status.Errorf(codes.InvalidArgument, "fsproxy: undecodable CommitRequest: %v", err)
	}
	ws := writesOf(&cr)
	// The clock is read under the lock, so the buckets see time in order.
	p.mu.Lock()
	now := time.Now()
	v := p.core.decide(ws, now)
	p.mu.Unlock()
	if !v.forward {
		return v.err
	}
	var resp frame
	var header, trailer metadata.MD
	err := p.conn.Invoke(ctx, CommitMethod, req, &resp, grpc.Header(&header), grpc.Trailer(&trailer))
	p.mu.Lock()
	p.core.applied(ws, now, err == nil)
	p.mu.Unlock()
	if v.err != nil { // an applied fault: the client never learns the outcome
		return v.err
	}
	_ = ss.SetHeader(header)
	ss.SetTrailer(trailer)
	if err != nil {
		return err
	}
	return ss.SendMsg(resp)
}

// stream forwards a call of any shape: client messages up as they come
// (half-closing when the client does), the target's header, messages,
// trailer and status down.
func (p *Proxy) stream(ctx context.Context, cancel context.CancelFunc, ss grpc.ServerStream, method string) error {
	desc := &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}
	cs, err := p.conn.NewStream(ctx, desc, method)
	if err != nil {
		return err
	}
	// Up: this goroutine may outlive the call while the client's side is
	// open; ending the call (cancel, then the server) ends its RecvMsg.
	go func() {
		for {
			var m frame
			if err := ss.RecvMsg(&m); err != nil {
				if errors.Is(err, io.EOF) {
					_ = cs.CloseSend()
				} else {
					cancel() // the client went away
				}
				return
			}
			if err := cs.SendMsg(m); err != nil {
				return // the target ended the call: its status comes down
			}
		}
	}()
	headerSent := false
	for {
		var m frame
		err := cs.RecvMsg(&m)
		if !headerSent {
			if h, herr := cs.Header(); herr == nil {
				if err == nil {
					if serr := ss.SendHeader(h); serr != nil {
						return serr
					}
				} else {
					_ = ss.SetHeader(h)
				}
			}
			headerSent = true
		}
		if err != nil {
			ss.SetTrailer(cs.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(m); err != nil {
			return err
		}
	}
}

// frame is a message's bytes, as the wire carries them.
type frame []byte

// rawCodec passes frames through untouched in both directions.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	switch f := v.(type) {
	case frame:
		return f, nil
	case *frame:
		return *f, nil
	}
	return nil, fmt.Errorf("fsproxy: cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("fsproxy: cannot unmarshal into %T", v)
	}
	*f = append((*f)[:0], data...)
	return nil
}

// Name is "proto", so requests keep the content-type application/grpc+proto.
func (rawCodec) Name() string { return "proto" }
