package snapshot

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// states returns the state of id by List, by Summary and by Verify, which must agree.
func states(t *testing.T, r *Reader, id string) State {
	t.Helper()
	ctx := context.Background()
	list, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var listed State
	for _, s := range list {
		if s.SnapshotID == id {
			listed = s.State
		}
	}
	s, err := r.Summary(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != listed {
		t.Errorf("List says %s is %s, Summary %s", id, listed, s.State)
	}
	rep, err := r.Verify(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.State != listed {
		t.Errorf("List says %s is %s, Verify %s", id, listed, rep.State)
	}
	return s.State
}

// setRoot updates fields of the root of id.
func (e *env) setRoot(id string, updates ...firestore.Update) {
	e.t.Helper()
	if _, err := e.clean.Collection(DefaultCollection).Doc(id).Update(context.Background(), updates); err != nil {
		e.t.Fatal(err)
	}
}

// finishFirst is a lock backend that lets a write finish (finish runs)
// just before the first IsLocked asks the real backend: the race of a
// writer that records its outcome and unlocks between a reader's read of
// the root and its lock check.
type finishFirst struct {
	locking.Backend
	once   sync.Once
	finish func()
}

func (f *finishFirst) IsLocked(ctx context.Context, key string) (bool, error) {
	f.once.Do(f.finish)
	return f.Backend.IsLocked(ctx, key)
}

func TestReaderLiveness(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	locker := e.locker()
	live := NewReader(e.clean, "", WithLockBackends(locker))
	blind := NewReader(e.clean, "")

	// A writer at work, stalled between its root and its chunks, holds
	// the lock: writing; a Reader without the backend cannot tell.
	inChunks, resume := make(chan struct{}), make(chan struct{})
	w := e.writer(withBeforeChunks(func(context.Context) { close(inChunks); <-resume }))
	errc := make(chan error, 1)
	go func() { _, err := w.Write(ctx, day, gen(5, 1)); errc <- err }()
	<-inChunks
	if st := states(t, live, day); st != StateWriting {
		t.Errorf("write in progress: %s, want writing", st)
	}
	if st := states(t, blind, day); st != StateUnknown {
		t.Errorf("write in progress, no backend: %s, want unknown", st)
	}
	close(resume)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if st := states(t, live, day); st != StateComplete {
		t.Errorf("finished write: %s, want complete", st)
	}

	// A dead writer: the root says "writing", no lock holds the key.
	e.setRoot(day, firestore.Update{Path: layout.FieldPath(layout.FieldMetadata, layout.FieldStatus), Value: layout.StatusPartial},
		firestore.Update{Path: layout.FieldPath(layout.FieldMetadata, layout.FieldWriteState), Value: layout.StateWriting},
		firestore.Update{Path: layout.FieldPath(layout.FieldMetadata, layout.FieldWriteComplete), Value: false})
	if st := states(t, live, day); st != StateInterrupted {
		t.Errorf("dead writer: %s, want interrupted", st)
	}
	// Any live lock on the key means a writer at work, whatever its fence.
	r, err := locker.Acquire(ctx, e.lockKey(day), time.Minute)
	if err != nil || !r.OK {
		t.Fatal(r, err)
	}
	if st := states(t, live, day); st != StateWriting {
		t.Errorf("live lock: %s, want writing", st)
	}
	if ok, err := locker.Release(ctx, r.LockID); err != nil || !ok {
		t.Fatal(ok, err)
	}

	// The writer records its outcome and unlocks between the read and the
	// lock check: the root is read again, and it is complete.
	racing := NewReader(e.clean, "", WithLockBackends(&finishFirst{Backend: locker, finish: func() {
		e.setRoot(day, firestore.Update{Path: layout.FieldPath(layout.FieldMetadata, layout.FieldStatus), Value: "success"},
			firestore.Update{Path: layout.FieldPath(layout.FieldMetadata, layout.FieldWriteState), Value: layout.StateFinished},
			firestore.Update{Path: layout.FieldPath(layout.FieldMetadata, layout.FieldWriteComplete), Value: true})
	}}))
	if s, err := racing.Summary(ctx, day); err != nil || s.State != StateComplete {
		t.Errorf("finished during the check: %+v, %v; want complete", s, err)
	}
	// Verify reports the root as it read it: still being written then.
	e.setRoot(day, firestore.Update{Path: layout.FieldPath(layout.FieldMetadata, layout.FieldStatus), Value: layout.StatusPartial},
		firestore.Update{Path: layout.FieldPath(layout.FieldMetadata, layout.FieldWriteState), Value: layout.StateWriting},
		firestore.Update{Path: layout.FieldPath(layout.FieldMetadata, layout.FieldWriteComplete), Value: false})
	racing = NewReader(e.clean, "", WithLockBackends(&finishFirst{Backend: locker, finish: func() {
		e.setRoot(day, firestore.Update{Path: layout.FieldPath(layout.FieldMetadata, layout.FieldStatus), Value: "success"},
			firestore.Update{Path: layout.FieldPath(layout.FieldMetadata, layout.FieldWriteState), Value: layout.StateFinished},
			firestore.Update{Path: layout.FieldPath(layout.FieldMetadata, layout.FieldWriteComplete), Value: true})
	}}))
	if rep, err := racing.Verify(ctx, day, nil); err != nil || rep.State != StateWriting || rep.Complete {
		t.Errorf("Verify, finished during the check: %+v, %v; want writing, not complete", rep, err)
	}

	// A root of another lock backend than the Reader was given: unknown.
	e.setRoot(day, firestore.Update{Path: layout.FieldPath(layout.FieldMetadata, layout.FieldWriteState), Value: layout.StateWriting},
		firestore.Update{Path: layout.FieldPath(layout.FieldMetadata, layout.FieldWriterLockBackend), Value: "postgres"})
	if st := states(t, live, day); st != StateUnknown {
		t.Errorf("postgres-locked root, firestore backend only: %s, want unknown", st)
	}
	e.setRoot(day, firestore.Update{Path: layout.FieldPath(layout.FieldMetadata, layout.FieldWriterLockBackend), Value: "firestore"})

	// A backend that cannot be asked fails the read with a LockCheckError
	// naming the backend.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	_ = ln.Close()
	dead, err := (&emulator.Emulator{Host: refused}).Client(ctx, e.project)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	deadLocker, err := firestorelock.New(dead)
	if err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = NewReader(e.clean, "", WithLockBackends(deadLocker)).List(tctx)
	var lc *LockCheckError
	if !errors.As(err, &lc) || lc.Backend != "firestore" || lc.SnapshotID != day {
		t.Errorf("unreachable lock backend: %v; want a LockCheckError", err)
	}
}
