package snapshot

import (
	"context"
	"errors"
	"fmt"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// refusedByPrior reports whether err is checkPrior's refusal to replace the
// stored root, which is not a failure to write it.
func refusedByPrior(err error) bool {
	return errors.Is(err, ErrFencedOut) || errors.Is(err, ErrLockBackendSwitch) || errors.Is(err, ErrLockKeySwitch) ||
		errors.Is(err, ErrLockHeld)
}

// checkPrior decides whether a stored root may be replaced by this writer.
// Fence counters are per lock backend and per key, so the stored
// writerFence is compared with ours only when it was issued on our backend
// (writerLockBackend) and our key (writerLockKeyHash):
//
//   - another backend: ErrLockBackendSwitch, unless allowed;
//   - another key on our backend: ErrLockKeySwitch, unless allowed;
//   - a fence but no key: the root of a snapwriter from before keys named
//     the snapshot's document, whose fence counts on LegacyLockKey(id). It
//     is replaced (once: the new root records our key) unless a live lock
//     holds that key on our backend — a writer of that version at work —
//     which is ErrLockHeld (see checkLegacy);
//   - our key: ErrFencedOut when the stored fence is newer than ours.
func (j *job) checkPrior(ctx context.Context, md *layout.Metadata) error {
	in := &j.in
	switch prior, err := j.w.checkSwitch(md, *in); {
	case err != nil:
		return err
	case prior == priorLegacy:
		return j.w.checkLegacy(ctx, in.ID)
	case prior == priorSwitched:
		return nil
	}
	if fenceNewer(md.WriterFence, in.Fence) {
		return fmt.Errorf("%w: stored writerFence %s is newer than ours %s", ErrFencedOut, md.WriterFence, in.Fence)
	}
	return nil
}

// priorWriter is what checkSwitch finds of the writer of a stored root.
type priorWriter int

const (
	// priorOurs: no writer, or one of our lock backend and key, whose
	// fence ours is compared with.
	priorOurs priorWriter = iota
	// priorLegacy: a writer under LegacyLockKey (checkLegacy decides).
	priorLegacy
	// priorSwitched: a writer of another lock backend or key, replaced
	// as WithAllowLockBackendSwitch allows.
	priorSwitched
)

// checkSwitch is the part of checkPrior that needs no fence and no lock
// backend, which a plan (Plan) makes too: ErrLockBackendSwitch or
// ErrLockKeySwitch for a root stored by a writer of another lock backend
// or key, unless WithAllowLockBackendSwitch. md is the stored root's
// metadata.
func (w *Writer) checkSwitch(md *layout.Metadata, in rootInput) (priorWriter, error) {
	storedBackend, storedFence, storedKey := md.WriterLockBackend, md.WriterFence, md.WriterLockKeyHash
	switch {
	case storedBackend != "" && storedBackend != in.Backend:
		if w.cfg.allowSwitch {
			return priorSwitched, nil
		}
		return priorOurs, fmt.Errorf("%w: stored by a %q-locked writer, this writer uses %q", ErrLockBackendSwitch, storedBackend, in.Backend)
	case storedKey == "" && storedFence != "":
		return priorLegacy, nil
	case storedKey != "" && storedKey != in.KeyHash:
		if w.cfg.allowSwitch {
			return priorSwitched, nil
		}
		return priorOurs, fmt.Errorf("%w: stored by a writer holding the lock key with hash %s, this writer's key has hash %s (another snapwriter version?), and fences of different keys are not comparable",
			ErrLockKeySwitch, storedKey, in.KeyHash)
	}
	return priorOurs, nil
}

// checkLegacy decides whether a root written under LegacyLockKey(id), by
// a snapwriter from before keys named the snapshot's document, may be
// replaced: only while no live lock holds that key on this writer's
// backend. Writers of that version do not take our key, so a live one
// would not be excluded by our lock; while one is at work on the snapshot
// this is ErrLockHeld. Its fence and ours count on different keys and are
// not compared.
func (w *Writer) checkLegacy(ctx context.Context, id string) error {
	key := LegacyLockKey(id)
	live, err := w.locker.IsLocked(ctx, key)
	if err != nil {
		return fmt.Errorf("checking the lock of earlier snapwriter versions on this snapshot (key hash %s): %w", locking.HashKey(key), err)
	}
	if live {
		return fmt.Errorf("%w: a writer of an earlier snapwriter version holds its lock on this snapshot's date (the key snapshot:<date>, hash %s), which our lock does not exclude; let it finish and stop every writer of that version, then rerun",
			ErrLockHeld, locking.HashKey(key))
	}
	return nil
}

// fenceProblem is ErrFencedOut unless the snapshot's fence document, as
// the Firestore API returns it (nil when it is missing), carries this
// writer's fence: the check of every fenced transaction (txn.fenced). A
// newer writer's root commit writes that document, and so conflicts with
// the read.
func (in rootInput) fenceProblem(doc *pb.Document) error {
	if doc == nil {
		return fmt.Errorf("%w: the snapshot's fence document is gone", ErrFencedOut)
	}
	f := doc.GetFields()
	return in.fenceMismatch(f[layout.FieldWriterFence].GetStringValue(), f[layout.FieldWriterLockBackend].GetStringValue())
}

// fenceMismatch is ErrFencedOut unless the snapshot's fence document names
// this writer's fence and lock backend.
func (in rootInput) fenceMismatch(fence, backend string) error {
	if fence != in.Fence {
		return fmt.Errorf("%w: the snapshot carries writerFence %s, ours is %s", ErrFencedOut, fence, in.Fence)
	}
	if backend != in.Backend {
		return fmt.Errorf("%w: the snapshot was taken over by a %q-locked writer", ErrFencedOut, backend)
	}
	return nil
}

// fenceNewer reports whether fence a is newer than b. Fences compare as
// equal-width decimal strings; a longer one is larger.
func fenceNewer(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}
