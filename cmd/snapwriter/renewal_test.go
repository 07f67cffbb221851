package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/firestore"
	vkit "cloud.google.com/go/firestore/apiv1"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/snapshot"
)

// commitTouches reports whether req is a Commit that writes a document
// whose name holds part, and whether one of those writes is a field
// update (a mask: a lease extension) rather than a whole set.
func commitTouches(req any, part string) (touches, update bool) {
	cr, ok := req.(*firestorepb.CommitRequest)
	if !ok {
		return false, false
	}
	for _, w := range cr.GetWrites() {
		name := w.GetDelete()
		if u := w.GetUpdate(); u != nil {
			name = u.GetName()
		}
		if strings.Contains(name, part) {
			touches = true
			update = update || w.GetUpdateMask() != nil
		}
	}
	return touches, update
}

// Issue 25: the Firestore lock backend of a write has clients of its own —
// a Firestore client and an API client (firestorelock.WithAPIClient), each
// on a gRPC connection of its own — so the lease's requests never queue
// behind the writer's: every commit on the locks goes through one
// connection, none through the connections that carry the snapshot's
// documents, and every client the command opened is closed when it ends.
func TestWriteLockHasItsOwnClient(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	type opened struct {
		kind           string // "client" or "api"
		check          func() error
		locks, snapTxn bool // carried a commit on the locks, on the snapshot
	}
	var mu sync.Mutex
	var clients []*opened
	// The districts wait for the lease's first extension, an event, not
	// a time: the write outlasts a renewal however fast or slow the
	// machine, and the renewal has the whole TTL to be answered.
	extended := make(chan struct{})
	var once sync.Once
	c.interceptors = append(c.interceptors, func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if cr, ok := req.(*firestorepb.CommitRequest); ok && writesDistricts(cr) {
			select {
			case <-extended:
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	var out, errb bytes.Buffer
	a := newApp(strings.NewReader(genJSON(t, day, 120)), &out, &errb, func(k string) (string, bool) {
		v, ok := c.env[k]
		return v, ok
	})
	record := func(o *opened) grpc.UnaryClientInterceptor {
		return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			locks, extend := commitTouches(req, "/documents/locks/")
			snap, _ := commitTouches(req, "/documents/snapshots/")
			if extend {
				defer once.Do(func() { close(extended) })
			}
			mu.Lock()
			o.locks, o.snapTxn = o.locks || locks, o.snapTxn || snap
			mu.Unlock()
			return invoker(ctx, method, req, reply, cc, opts...)
		}
	}
	add := func(o *opened) {
		mu.Lock()
		clients = append(clients, o)
		mu.Unlock()
	}
	a.newClient = func(ctx context.Context, project, _ string) (*firestore.Client, error) {
		o := &opened{kind: "client"}
		cl, err := c.emulator().Client(ctx, project, record(o))
		if err == nil {
			o.check = func() error {
				_, err := cl.Collection("snapshots").Doc(day).Get(context.Background())
				return err
			}
			add(o)
		}
		return cl, err
	}
	a.newAPIClient = func(ctx context.Context) (*vkit.Client, error) {
		o := &opened{kind: "api"}
		api, err := c.emulator().APIClient(ctx, append(slices.Clone(c.interceptors), record(o))...)
		if err == nil {
			o.check = func() error {
				_, err := api.GetDocument(context.Background(), &firestorepb.GetDocumentRequest{
					Name: "projects/" + c.project + "/databases/(default)/documents/snapshots/" + day})
				return err
			}
			add(o)
		}
		return api, err
	}
	// A TTL of 3 s renews the lock every second while the write runs.
	if code := a.run(context.Background(), []string{"write", "--input", "-", "--lock-ttl", "3s"}); code != exitOK {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	lockConns, snapConns := 0, 0
	for i, o := range clients {
		if o.locks && o.snapTxn {
			t.Errorf("%s %d carried both the lock's and the snapshot's commits", o.kind, i)
		}
		if o.locks {
			lockConns++
		}
		if o.snapTxn {
			snapConns++
		}
		// A closed client's connection refuses every call.
		if err := o.check(); status.Code(err) != codes.Canceled {
			t.Errorf("%s %d still works after the command ended (%v): not closed", o.kind, i, err)
		}
	}
	// The lock's commits go through its API client; the snapshot's
	// documents through the writer's API client (the root transaction,
	// the chunks, the records, the finish): one connection each.
	if lockConns != 1 || snapConns != 1 {
		t.Errorf("%d connections carried the lock's commits and %d the snapshot's, of %d opened; want 1 and 1", lockConns, snapConns, len(clients))
	}
}

// holdRenewals is an interceptor that leaves every lease extension (a
// commit updating a lock document's expiry) unanswered until its deadline,
// the lock's expiry, and refuses the snapshot's root commit once the write
// has ended it: a lease lost to its renewals before the root was written.
func holdRenewals(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if _, extend := commitTouches(req, "/documents/locks/"); extend {
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	if root, _ := commitTouches(req, "/documents/snapshots/"+day); root {
		<-ctx.Done()
		return status.Error(codes.FailedPrecondition, "injected: refused as the lease ended")
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// Issue 25: a write whose lease is lost to renewals that go unanswered,
// before its root document was written, exits 1 with its own message:
// nothing was written, rerun. It names the lock store, the renewals and
// --lock-ttl, the bound that ran out — not --timeout (30 s by default),
// which the command was nowhere near — and not "root document write
// failed". Nothing is stored.
func TestLeaseLostBeforeRootMessage(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.interceptors = append(c.interceptors, holdRenewals)
	code, out, errs := c.run(genJSON(t, day, 20), "write", "--input", "-", "--lock-ttl", "1s")
	if code != exitError {
		t.Fatalf("exit %d, want 1\n%s", code, errs)
	}
	if !strings.Contains(out, "NOT WRITTEN") || strings.Contains(out, "PARTIAL") {
		t.Errorf("the result says otherwise than nothing written:\n%s", out)
	}
	msg := lastLine(errs)
	t.Log(msg)
	for _, want := range []string{"no answer from the Firestore emulator at " + emu.Host + " to the lock's renewals before the lock expired (--lock-ttl 1s)",
		"lost the lock before the root document was written: nothing was written", "rerun the write"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message does not say %q:\n%s", want, msg)
		}
	}
	for _, wrong := range []string{"--timeout", "root document write failed", "within 30s"} {
		if strings.Contains(msg, wrong) {
			t.Errorf("message says %q:\n%s", wrong, msg)
		}
	}
	if docs, err := c.client().Collection("snapshots").Documents(context.Background()).GetAll(); err != nil || len(docs) != 0 {
		t.Errorf("%d snapshot documents stored (%v); want none", len(docs), err)
	}
}

// A root document whose transaction is answered DEADLINE_EXCEEDED names
// the root's transaction and its attempt timeout, not --timeout.
func TestRootTimeoutMessage(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.interceptors = append(c.interceptors, func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if root, _ := commitTouches(req, "/documents/snapshots/"+day); root {
			return status.Error(codes.DeadlineExceeded, "injected")
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	code, _, errs := c.run(genJSON(t, day, 3), "write", "--input", "-", "--max-retries", "0")
	if code != exitError {
		t.Fatalf("exit %d, want 1\n%s", code, errs)
	}
	msg := lastLine(errs)
	t.Log(msg)
	if want := "no answer from the Firestore emulator at " + emu.Host + " to the root document's transaction within 30s an attempt"; !strings.Contains(msg, want) {
		t.Errorf("message does not say %q:\n%s", want, msg)
	}
	if strings.Contains(msg, "--timeout") {
		t.Errorf("message blames --timeout:\n%s", msg)
	}
}

// Acquiring the lock is what --request-timeout bounds in a write: a store
// that never answers is named with it. --timeout, its deprecated name
// (the one test that gives it to a write), still sets it, with a notice,
// and the message names the flag that was given.
func TestAcquireTimeoutMessage(t *testing.T) {
	t.Parallel()
	addr := blackHole(t)
	for _, flag := range []string{"--request-timeout", "--timeout"} {
		t.Run(flag, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			c.env["FIRESTORE_EMULATOR_HOST"] = addr
			code, _, errs := c.run(genJSON(t, day, 3), "write", "--input", "-", "--lock-wait", "0s", flag, "1s")
			if code != exitError {
				t.Fatalf("exit %d, want 1\n%s", code, errs)
			}
			if want := "no answer from the Firestore emulator at " + addr + " within 1s (" + flag + "): snapshot " + day + ": acquiring the snapshot lock"; !strings.Contains(errs, want) {
				t.Errorf("message does not say %q:\n%s", want, lastLine(errs))
			}
			notice := "Flag --timeout has been deprecated, use --request-timeout"
			if got := strings.Contains(errs, notice); got != (flag == "--timeout") {
				t.Errorf("deprecation notice shown: %v, want %v\n%s", got, flag == "--timeout", errs)
			}
		})
	}
}

// The text result of a write that shed chunks says so.
func TestPrintResultSaysShed(t *testing.T) {
	var out bytes.Buffer
	a := newApp(strings.NewReader(""), &out, &out, func(string) (string, bool) { return "", false })
	res := &snapshot.Result{SnapshotID: day, Outcome: snapshot.OutcomeComplete, TotalBatches: 1, SuccessfulBatches: 1, FailedDistricts: []string{},
		LockRenewals: snapshot.LockRenewals{Count: 9, SlowestMs: 1900, Sheds: 2, MinConcurrency: 4, Pauses: 1}}
	if err := a.printResult(res, false, false); err != nil {
		t.Fatal(err)
	}
	if want := "the store was slow to answer (the slowest lock renewal took 1900 ms): ran as few as 4 chunks at once, and paused once"; !strings.Contains(out.String(), want) {
		t.Errorf("output does not say %q:\n%s", want, out.String())
	}
	out.Reset()
	res.LockRenewals.Sheds, res.LockRenewals.MinConcurrency, res.LockRenewals.Pauses = 0, 16, 0
	if err := a.printResult(res, false, false); err != nil || strings.Contains(out.String(), "slow to answer") {
		t.Errorf("a write that never shed mentions renewals (%v):\n%s", err, out.String())
	}
}
