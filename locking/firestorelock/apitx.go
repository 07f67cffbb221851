package firestorelock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/internal/fstx"
)

// write is one write of a lock transaction, on either path: the Firestore
// client's RunTransaction (applyWrites) or the API's (pbWrite).
type write struct {
	ref    *firestore.DocumentRef
	set    map[string]any // replaces the document with these fields
	update map[string]any // sets these top-level fields of the document, which must exist
	del    bool           // deletes the document
}

// applyWrites adds writes to tx.
func applyWrites(tx *firestore.Transaction, writes []write) error {
	for _, w := range writes {
		var err error
		switch {
		case w.del:
			err = tx.Delete(w.ref)
		case w.update != nil:
			ups := make([]firestore.Update, 0, len(w.update))
			for k, v := range w.update {
				ups = append(ups, firestore.Update{Path: k, Value: v})
			}
			err = tx.Update(w.ref, ups)
		default:
			err = tx.Set(w.ref, w.set)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// pbWrite is w as the Firestore client sends it: a set replaces the
// document, an update has a field mask and requires the document to
// exist, as Transaction.Update does.
func pbWrite(w write) (*pb.Write, error) {
	if w.del {
		return &pb.Write{Operation: &pb.Write_Delete{Delete: w.ref.Path}}, nil
	}
	fields := w.set
	if w.update != nil {
		fields = w.update
	}
	doc := &pb.Document{Name: w.ref.Path, Fields: make(map[string]*pb.Value, len(fields))}
	for k, v := range fields {
		switch x := v.(type) {
		case string:
			doc.Fields[k] = &pb.Value{ValueType: &pb.Value_StringValue{StringValue: x}}
		case int64:
			doc.Fields[k] = &pb.Value{ValueType: &pb.Value_IntegerValue{IntegerValue: x}}
		default:
			return nil, fmt.Errorf("firestorelock: cannot encode field %s of type %T", k, v)
		}
	}
	pw := &pb.Write{Operation: &pb.Write_Update{Update: doc}}
	if w.update != nil {
		pw.UpdateMask = &pb.DocumentMask{}
		for k := range w.update {
			pw.UpdateMask.FieldPaths = append(pw.UpdateMask.FieldPaths, k)
		}
		pw.CurrentDocument = &pb.Precondition{ConditionType: &pb.Precondition_Exists{Exists: true}}
	}
	return pw, nil
}

// encode is writes as the API sends them (pbWrite), or decide's err.
func encode(writes []write, err error) ([]*pb.Write, error) {
	if err != nil {
		return nil, err
	}
	pws := make([]*pb.Write, len(writes))
	for i, w := range writes {
		if pws[i], err = pbWrite(w); err != nil {
			return nil, err
		}
	}
	return pws, nil
}

// apiTransaction runs a lock transaction on the API client (WithAPIClient):
// one read of refs that begins the transaction (BatchGetDocuments with
// new_transaction), decide — handed each document's fields in refs' order,
// nil for a missing one — and the commit of the writes it returns: two
// round trips where RunTransaction takes three. Like RunTransaction with
// MaxAttempts(attempts), it retries a transaction Firestore aborted, up to
// attempts in all, with the client's backoff, naming the aborted one so
// that the server gives the retry priority.
//
// As RunTransaction does, it pauses after every aborted attempt, the last
// one too, before it returns the ABORTED error. Under contention that
// pause is what keeps the lock document free for a while: on the emulator
// every contender's read takes a shared lock on it that is granted even
// while another's commit waits to write it, and a commit waits for all of
// them (2 s, then "Transaction lock timeout"; the emulator gives a retry no
// priority). Two transactions that read a free lock and both write it
// therefore both fail after 2 s, and a read arriving meanwhile joins them.
// Returning at once after the last attempt sent a caller that retries
// contention (locking.Acquire) straight back to read the document as it
// was let go, so that some contender always held it: the livelock of
// TestConformanceOnAPI/MutualExclusionDo (docs/how-a-write-works.md,
// "Round trips"). The pause alone made it as rare as RunTransaction's
// (1 run in 10); the Backend's own attempts on one document also take
// turns now (gatedAttempt), which ends it among one process's contenders.
func (b *Backend) apiTransaction(ctx context.Context, attempts int, refs []*firestore.DocumentRef,
	decide func(ctx context.Context, docs []map[string]any) ([]write, error)) error {
	db, _, _ := strings.Cut(refs[0].Path, "/documents/")
	ctx = fstx.WithDatabase(ctx, db)
	var (
		prev    []byte
		backoff gax.Backoff // the client's transaction backoff: 1 s doubling to 30 s
	)
	for i := 1; ; i++ {
		tid, err := b.gatedAttempt(ctx, db, refs, prev, decide)
		if err == nil || status.Code(err) != codes.Aborted {
			return err
		}
		// A read aborted before it named its transaction leaves the one
		// before it as the transaction the next attempt retries.
		if len(tid) > 0 {
			prev = tid
		}
		t := time.NewTimer(backoff.Pause())
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if i >= attempts {
			return err
		}
	}
}

// gatedAttempt is apiAttempt once no other attempt of b on the same lock
// document is in flight (docGates): the Backend's own transactions on one
// lock document take their turns instead of colliding at the server. Two
// of them can never both write it, and on the emulator two that have both
// read it both wait 2 s for the other and fail (see apiTransaction), so a
// process's own contenders (a writer's acquire and its lease's renewal,
// the conformance suite's workers sharing one Backend) no longer make that
// deadlock among themselves; other processes' transactions still can, and
// the backoff spreads them. The turn ends with the attempt, before its
// backoff.
func (b *Backend) gatedAttempt(ctx context.Context, db string, refs []*firestore.DocumentRef, prev []byte,
	decide func(ctx context.Context, docs []map[string]any) ([]write, error)) ([]byte, error) {
	leave, err := b.gates.enter(ctx, refs[0].Path)
	if err != nil {
		return nil, err
	}
	defer leave()
	return b.apiAttempt(ctx, db, refs, prev, decide)
}

// docGates gives the attempts of one Backend on one lock document their
// turns, one at a time (a channel's blocked senders are served about in
// the order they came). The zero value is ready.
type docGates struct {
	mu sync.Mutex
	m  map[string]*docGate
}

type docGate struct {
	turn  chan struct{} // holds one token while an attempt runs
	users int           // attempts running or waiting; the gate goes at 0
}

// enter waits for the turn on the document name, or for ctx to end; leave
// ends the turn.
func (g *docGates) enter(ctx context.Context, name string) (leave func(), err error) {
	g.mu.Lock()
	if g.m == nil {
		g.m = map[string]*docGate{}
	}
	d := g.m[name]
	if d == nil {
		d = &docGate{turn: make(chan struct{}, 1)}
		g.m[name] = d
	}
	d.users++
	g.mu.Unlock()
	done := func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if d.users--; d.users == 0 {
			delete(g.m, name)
		}
	}
	select {
	case d.turn <- struct{}{}:
		return func() { <-d.turn; done() }, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}

// apiAttempt is one attempt of apiTransaction; it returns the
// transaction's id, for the next attempt's retry_transaction.
//
// The read that begins the transaction is never cancelled (fstx): an
// attempt whose ctx ends mid-read returns at once and leaves the read to
// finish in the background and roll back the transaction it began, since
// a transaction whose id never arrived would hold its read of the lock
// document, and so every acquire, extend and release of the key, until
// Firestore expires it.
func (b *Backend) apiAttempt(ctx context.Context, db string, refs []*firestore.DocumentRef, prev []byte,
	decide func(ctx context.Context, docs []map[string]any) ([]write, error)) (tid []byte, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	names := make([]string, len(refs))
	for i, r := range refs {
		names[i] = r.Path
	}
	read := b.reads.Begin(ctx, b.api, db, names, fstx.ReadWrite(prev)).Wait(ctx)
	if read.Err != nil {
		return read.Tid, read.Err // rolled back already
	}
	tid = read.Tid
	docs := make([]map[string]any, len(refs))
	for i, n := range names {
		if d := read.Found[n]; d != nil {
			docs[i] = fstx.Fields(d)
		}
	}
	pws, err := encode(decide(ctx, docs))
	if err != nil {
		fstx.Rollback(ctx, b.api, db, tid)
		return tid, err
	}
	// A transaction that writes nothing commits too, as RunTransaction's
	// does: it ends the transaction and releases its read at once. The
	// API client retries it as it retries RunTransaction's (UNAVAILABLE,
	// RESOURCE_EXHAUSTED: a commit of one transaction applies once).
	if _, err := b.api.Commit(ctx, &pb.CommitRequest{Database: db, Writes: pws, Transaction: tid}); err != nil {
		// As the client does after a failed commit: one that never reached
		// the server would leave the read holding its lock until the
		// transaction expires; one that was applied makes this a no-op.
		fstx.Rollback(ctx, b.api, db, tid)
		return tid, err
	}
	return tid, nil
}
