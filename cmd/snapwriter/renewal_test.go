package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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

// Issue 25: the Firestore lock backend of a write has a Firestore client
// of its own — its own gRPC connection — so the lease's requests never
// queue behind the writer's: every request on the locks goes through one
// client, none through the clients that carry the snapshot's documents,
// and every client the command opened is closed when it ends.
func TestWriteLockHasItsOwnClient(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	type opened struct {
		client         *firestore.Client
		locks, snapTxn bool // carried a request on the locks, on the snapshot
	}
	var mu sync.Mutex
	var clients []*opened
	var out, errb bytes.Buffer
	a := newApp(strings.NewReader(genJSON(t, day, 120)), &out, &errb, func(k string) (string, bool) {
		v, ok := c.env[k]
		return v, ok
	})
	a.newClient = func(ctx context.Context, project, _ string) (*firestore.Client, error) {
		o := &opened{}
		record := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			locks, _ := commitTouches(req, "/documents/locks/")
			snap, _ := commitTouches(req, "/documents/snapshots/")
			mu.Lock()
			o.locks, o.snapTxn = o.locks || locks, o.snapTxn || snap
			mu.Unlock()
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		cl, err := c.emulator().Client(ctx, project, record)
		if err == nil {
			o.client = cl
			mu.Lock()
			clients = append(clients, o)
			mu.Unlock()
		}
		return cl, err
	}
	a.newAPIClient = c.dialAPI
	// A TTL of 1 s renews the lock every 333 ms while the write runs.
	if code := a.run(context.Background(), []string{"write", "--input", "-", "--lock-ttl", "1s"}); code != exitOK {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	lockClients, snapClients := 0, 0
	for i, o := range clients {
		if o.locks && o.snapTxn {
			t.Errorf("client %d carried both the lock's and the snapshot's commits", i)
		}
		if o.locks {
			lockClients++
		}
		if o.snapTxn {
			snapClients++
		}
		// A closed client's connection refuses every call.
		_, err := o.client.Collection("snapshots").Doc(day).Get(context.Background())
		if status.Code(err) != codes.Canceled {
			t.Errorf("client %d still works after the command ended (%v): not closed", i, err)
		}
	}
	if lockClients != 1 || snapClients != 1 {
		t.Errorf("%d clients carried the lock's commits and %d the snapshot's, of %d opened; want one each", lockClients, snapClients, len(clients))
	}
}
