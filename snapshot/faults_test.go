package snapshot

import (
	"context"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// commitCall is one Commit RPC as the fault injector saw it.
type commitCall struct {
	seq       int
	ctx       context.Context // the Commit call's, which ends when the write's work context does
	root      bool            // writes the snapshot's root document
	rootSet   bool            // sets the whole root document (not an update of some fields)
	fence     bool            // writes the snapshot's fence document
	districts []string        // district ids it sets or deletes
	pages     int             // manifest pages it writes
	// recorded: the districts the root write's metadata.successfulDistricts
	// lists (nil when it writes no metadata); state: its metadata.writeState.
	recorded []string
	state    string
	bytes    int // the request's encoded size
	start    time.Time
	end      time.Time
	err      error
}

// faults is a gRPC interceptor that records every Commit and fails the ones
// its rule picks, before they reach the emulator.
type faults struct {
	mu    sync.Mutex
	calls []*commitCall
	rule  func(c *commitCall) error
	// after, if set, runs once a Commit has reached the emulator and
	// succeeded; its error is what the client sees instead (a response
	// lost on the way back).
	after func(c *commitCall) error
}

// deny refuses, for good (PERMISSION_DENIED), every commit that writes
// district id: a chunk that fails permanently.
func (e *env) deny(id string) {
	e.f.setRule(func(c *commitCall) error {
		if c.has(id) {
			return status.Error(codes.PermissionDenied, "injected")
		}
		return nil
	})
}

// refuseFinish refuses, for good, every commit that records the write as
// finished: the finish.
func (e *env) refuseFinish() {
	e.f.setRule(func(c *commitCall) error {
		if c.root && c.state == layout.StateFinished {
			return status.Error(codes.PermissionDenied, "denied")
		}
		return nil
	})
}

func (f *faults) setAfter(after func(c *commitCall) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.after = after
}

func (f *faults) setRule(rule func(c *commitCall) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rule = rule
}

func (f *faults) interceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		cr, ok := req.(*firestorepb.CommitRequest)
		if !ok || !strings.HasSuffix(method, "/Commit") {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		c := &commitCall{ctx: ctx, start: time.Now(), bytes: proto.Size(cr)}
		// The writer sends documents' fields in their wire form, as
		// unknown fields (wire.go): read them from a decoded copy.
		var sent firestorepb.CommitRequest
		if b, err := proto.Marshal(cr); err == nil && proto.Unmarshal(b, &sent) == nil {
			cr = &sent
		}
		for _, w := range cr.GetWrites() {
			name := w.GetDelete()
			if u := w.GetUpdate(); u != nil {
				name = u.GetName()
			}
			_, path, _ := strings.Cut(name, "/documents/")
			switch segs := strings.Split(path, "/"); {
			case strings.Contains(name, "/districts/district_"):
				c.districts = append(c.districts, name[strings.LastIndex(name, "/districts/district_")+len("/districts/district_"):])
			case len(segs) == 2:
				c.root = true
				c.rootSet = c.rootSet || w.GetUpdate() != nil && w.GetUpdateMask() == nil
				if md := w.GetUpdate().GetFields()["metadata"].GetMapValue().GetFields(); md != nil {
					c.state = md["writeState"].GetStringValue()
					c.recorded = []string{}
					for _, v := range md["successfulDistricts"].GetArrayValue().GetValues() {
						c.recorded = append(c.recorded, v.GetStringValue())
					}
				}
			case len(segs) == 4 && segs[2] == layout.FenceCollection:
				c.fence = true
			case len(segs) == 4 && segs[2] == layout.PagesCollection:
				c.pages++
			}
		}
		f.mu.Lock()
		c.seq = len(f.calls)
		f.calls = append(f.calls, c)
		rule, after := f.rule, f.after
		f.mu.Unlock()
		var err error
		if rule != nil {
			err = rule(c)
		}
		if err == nil {
			err = invoker(ctx, method, req, reply, cc, opts...)
			if err == nil && after != nil {
				err = after(c)
			}
		}
		f.mu.Lock()
		c.end, c.err = time.Now(), err
		f.mu.Unlock()
		return err
	}
}

// snapshot of the calls so far.
func (f *faults) commits() []commitCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]commitCall, len(f.calls))
	for i, c := range f.calls {
		out[i] = *c
	}
	return out
}

// commitsFor counts Commit calls that wrote district id.
func (f *faults) commitsFor(id string) int {
	n := 0
	for _, c := range f.commits() {
		for _, d := range c.districts {
			if d == id {
				n++
				break
			}
		}
	}
	return n
}

func (c *commitCall) has(id string) bool {
	for _, d := range c.districts {
		if d == id {
			return true
		}
	}
	return false
}
