// Package snapshot writes and reads district-statistics snapshots in
// Firestore: a fenced root document first, then the district documents in
// chunked transactions — their progress recorded in the root about once a
// second, never by the chunks themselves — then the manifest that says
// what was written.
//
// A Writer holds the snapshot's lock (a locking.Backend) for the whole
// write, and every chunk checks the lock's fence in its transaction, so a
// writer that lost the lock can never overwrite a newer one's districts.
// The root never lists a district whose document is absent; a writer
// killed between two records leaves districts stored but not yet
// recorded, which Repair (or the same Write again) records without
// writing them again.
// An incomplete write is never silent: the manifest lists the districts
// not written, and Write returns ErrPartial beside its Result:
//
//	res, err := w.Write(ctx, "2026-11-20", snap)
//	switch {
//	case err == nil: // complete (or skipped: WithSkipComplete)
//	case errors.Is(err, snapshot.ErrPartial): // res.FailedDistricts; w.Repair(ctx, id, snap) completes it
//	case errors.Is(err, snapshot.ErrLockHeld): // another writer is at work; nothing written
//	default: // see Write for the other endings
//	}
//
// A Reader reads snapshots back in the input format (Get), lists them with
// their state (List, Summary, Latest) and checks what is stored against
// the manifest and an input (Verify).
package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"

	"cloud.google.com/go/firestore"
	vkit "cloud.google.com/go/firestore/apiv1"

	"github.com/snapwriter/snapwriter/internal/fstx"
	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/pacing"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// Writer writes snapshots. It is safe for concurrent use.
type Writer struct {
	client *firestore.Client
	api    *vkit.Client // the chunks' transactions run on it
	ownAPI bool         // api was opened by NewWriter, and Close closes it
	// reads begins the reads that begin the write's transactions on api,
	// and Close waits for those a timed-out attempt left to finish and
	// roll back (fstx).
	reads    fstx.Pending
	locker   locking.Backend
	cfg      config
	lockName string
	scope    LockScope // names the snapshots' lock keys (LockScope.LockKey)
	tel      *telemetry
}

// NewWriter returns a Writer that guards each snapshot with locker, under
// the key LockScope.LockKey gives for the client's project and database and
// the collection (ScopeOf). It fails when that key cannot be formed: an
// unknown project on a lock backend other than Firestore's.
func NewWriter(client *firestore.Client, locker locking.Backend, opts ...Option) (*Writer, error) {
	if client == nil || locker == nil {
		return nil, errors.New("snapshot: a Firestore client and a lock backend are required")
	}
	w, err := configure(client, locker.Capabilities().Backend, opts)
	if err != nil {
		return nil, err
	}
	w.locker, w.api = locker, w.cfg.api
	if w.api == nil {
		if w.api, err = DialAPI(context.Background(), os.Getenv(emulatorHostEnv)); err != nil {
			return nil, fmt.Errorf("snapshot: opening the Firestore API client: %w", err)
		}
		w.ownAPI = true
	}
	return w, nil
}

// configure is the Writer of client and opts for the lock backend named
// lockName, without its lock backend and API client: what NewWriter and
// NewPlanner share.
func configure(client *firestore.Client, lockName string, opts []Option) (*Writer, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cfg.retry.ContentionWait = cfg.contention
	if cfg.budget == nil {
		cfg.budget, _ = pacing.New(pacing.DefaultRamp(), 1) // valid by construction
	}
	scope, err := ScopeOf(client, cfg.collection)
	if err == nil {
		err = scope.validate(lockName)
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	w := &Writer{client: client, cfg: cfg, lockName: lockName, scope: scope}
	if w.tel, err = newTelemetry(cfg.otel, scope.Project); err != nil {
		return nil, err
	}
	return w, nil
}

// Close waits for the reads that timed-out transaction attempts left to
// finish and roll back (at most a minute), then closes the Firestore API
// client NewWriter opened (none when one was given with WithAPIClient).
// The firestore.Client and the lock backend stay open: they are the
// caller's.
func (w *Writer) Close() error {
	w.reads.Wait()
	if !w.ownAPI {
		return nil
	}
	return w.api.Close()
}

// Write stores snap under id: lock, root, chunks, finish, unlock. It
// returns nil when the snapshot is complete (written, or skipped as
// WithSkipComplete allows), and a Result whenever the root was attempted.
//
// A write that did not complete says why, for errors.Is: ErrPartial (some
// districts were not written; the manifest records which, and Repair
// completes them — with ErrLockLost too when the lease ended mid-write and
// nobody else wrote), ErrFencedOut (a newer writer took over),
// ErrManifestNotRecorded (the outcome could not be stored;
// Result.Outcome is OutcomeNotRecorded), ErrRootFailed, ErrLockHeld,
// ErrTimeout; each an *Error with the snapshot's id.
func (w *Writer) Write(ctx context.Context, id string, snap *model.Snapshot) (*Result, error) {
	return w.run(ctx, opWrite, id, snap)
}

// names are the names of snapshot id's documents.
func (w *Writer) names(id string) layout.Names {
	return layout.NewNames(w.client.Collection(w.cfg.collection), id)
}
