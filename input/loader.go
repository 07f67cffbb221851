package input

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/input/gcs"
	"github.com/snapwriter/snapwriter/model"
)

// Defaults of a Loader's polling for an input that is not ready.
const (
	// DefaultPoll is the first wait before an input is read again.
	DefaultPoll = time.Second
	// MaxPoll is the longest wait between two reads of an input: the
	// polls double up to it, so a long wait costs a read a minute or two,
	// and an upload that lands is seen within MaxPoll.
	MaxPoll = 30 * time.Second
)

// Loader reads inputs wherever they are: a local Snapshot JSON file or
// per-district snapshot directory, "-" for stdin, or a gs:// object or
// folder. The command line, backfills and scheduled runs all read through
// one, so that an input is refused, and waited for, alike.
//
// A gs:// folder is written only once its upload has finished: its
// manifest.json says writeComplete: true. A local directory is refused
// only when its manifest.json says writeComplete: false; without the
// field it is read, since exports on disk made before the flag existed
// lack it, and a copy on disk is made by a process that has finished.
type Loader struct {
	// Stdin is what "-" reads.
	Stdin io.Reader
	// Storage opens the Cloud Storage store, on the first gs:// input
	// only: a command that reads local files needs no credentials. Nil
	// refuses gs:// inputs.
	Storage func(ctx context.Context) (*gcs.Store, error)
	// WaitUntil is when to stop waiting for an input that is not ready
	// (model.ErrNotReady) or does not exist yet: until then it is read
	// again, after DefaultPoll, doubling to MaxPoll. Zero: not waited for.
	// Every input of a Loader shares it, so a backfill waits once in all.
	WaitUntil time.Time
	// FirstPoll, when positive, replaces DefaultPoll (tests).
	FirstPoll time.Duration
	// Log, when set, gets a line each time an input is waited for.
	Log *zap.Logger

	once     sync.Once
	store    *gcs.Store
	storeErr error
}

// Load reads the input at src as Load does, gs:// URLs too, waiting for
// it as WaitUntil says. The caller closes the snapshot.
func (l *Loader) Load(ctx context.Context, src string) (*model.Snapshot, error) {
	return l.wait(ctx, src, func() (*model.Snapshot, error) { return l.loadOnce(ctx, src) })
}

// logRead logs that src is being read, and returns the func that logs
// how the read ended: a gs:// input is copied whole before anything is
// written, which can take a while.
func (l *Loader) logRead(src string) func(*model.Snapshot, error) {
	if l.Log == nil || !gcs.IsURL(src) {
		return func(*model.Snapshot, error) {}
	}
	t0 := time.Now()
	l.Log.Info("reading input", zap.String("input", src))
	return func(snap *model.Snapshot, err error) {
		if err != nil {
			return // the caller reports it
		}
		l.Log.Info("input read", zap.String("input", src), zap.Int("districts", len(snap.Payload.Districts)),
			zap.Int64("durationMs", time.Since(t0).Milliseconds()))
	}
}

// LoadDated reads the input at src as the snapshot of date, and checks it
// with CheckDated. The caller closes the snapshot.
func (l *Loader) LoadDated(ctx context.Context, src, date string) (*model.Snapshot, error) {
	snap, err := l.Load(ctx, src)
	return checkedAs(snap, err, src, date)
}

// Dated is the Source of the dated inputs under root, a local directory
// or a gs:// folder: the snapshot folder root/YYYY-MM-DD/ when there is
// one, else the file root/YYYY-MM-DD.json. When neither is there, the
// error names both (and matches model.ErrMissing, which WaitUntil waits
// for).
func (l *Loader) Dated(root string) Source {
	return func(ctx context.Context, date string) (*model.Snapshot, error) {
		var src string
		snap, err := l.wait(ctx, root, func() (snap *model.Snapshot, err error) {
			snap, src, err = l.loadDated(ctx, root, date)
			return snap, err
		})
		return checkedAs(snap, err, src, date)
	}
}

// loadDated reads the input of date under root once, and says where it
// found it: the folder when there is one, else the .json file; an error
// matching model.ErrMissing names both when neither is there. A gs://
// folder is simply read, and the file tried when it turns out missing, so
// that finding the input costs no request of its own.
func (l *Loader) loadDated(ctx context.Context, root, date string) (*model.Snapshot, string, error) {
	if !gcs.IsURL(root) {
		dir := filepath.Join(root, date)
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			snap, err := l.loadOnce(ctx, dir)
			return snap, dir, err
		}
		file := dir + ".json"
		if _, err := os.Stat(file); err != nil {
			return nil, "", &model.MissingError{Msg: fmt.Sprintf("no input for %s in %s: neither %s/ nor %s exists", date, root, dir, file), Input: true}
		}
		snap, err := l.loadOnce(ctx, file)
		return snap, file, err
	}
	u, err := gcs.ParseURL(root)
	if err != nil {
		return nil, "", err
	}
	folder, file := u.Join(date+"/"), u.Join(date+".json")
	for _, src := range []gcs.URL{folder, file} {
		snap, err := l.loadOnce(ctx, src.String())
		if !errors.Is(err, model.ErrMissing) {
			return snap, src.String(), err
		}
	}
	return nil, "", &model.MissingError{Msg: fmt.Sprintf("no input for %s in %s: neither %s nor %s exists", date, u.Dir(), folder, file), Input: true}
}

// Store is the Cloud Storage store gs:// inputs are read from, opened on
// first use.
func (l *Loader) Store(ctx context.Context) (*gcs.Store, error) {
	l.once.Do(func() {
		if l.Storage == nil {
			l.storeErr = fmt.Errorf("%w: Cloud Storage inputs are not available here", model.ErrInvalid)
			return
		}
		l.store, l.storeErr = l.Storage(ctx)
	})
	return l.store, l.storeErr
}

// loadOnce reads src once.
func (l *Loader) loadOnce(ctx context.Context, src string) (*model.Snapshot, error) {
	if !gcs.IsURL(src) {
		return Load(src, l.Stdin)
	}
	u, err := gcs.ParseURL(src)
	if err != nil {
		return nil, err
	}
	store, err := l.Store(ctx)
	if err != nil {
		return nil, err
	}
	done := l.logRead(src)
	snap, err := store.Load(ctx, u)
	done(snap, err)
	return snap, err
}

// wait calls load until it returns an input that is ready, or an error
// that waiting does not mend, or WaitUntil passes: then an input still
// not ready, or still missing, is not ready (model.ErrNotReady), with how
// long it was waited for.
func (l *Loader) wait(ctx context.Context, src string, load func() (*model.Snapshot, error)) (*model.Snapshot, error) {
	var snap *model.Snapshot
	var last error
	t0 := time.Now()
	_, err := l.Poll(ctx, src, func() (bool, error) {
		snap, last = load()
		if last != nil && Waitable(last) {
			return false, nil
		}
		return true, last
	})
	switch {
	case err != nil:
		return nil, err
	case last == nil:
		return snap, nil
	case l.WaitUntil.IsZero():
		return nil, last
	case errors.Is(last, model.ErrNotReady):
		return nil, fmt.Errorf("%w (waited %s for it)", last, time.Since(t0).Round(time.Second))
	}
	return nil, fmt.Errorf("%w: %w (waited %s for it)", model.ErrNotReady, last, time.Since(t0).Round(time.Second))
}

// Poll calls try until it reports done or fails, or WaitUntil passes
// (with a zero WaitUntil, once), waiting DefaultPoll (or FirstPoll) between two
// calls, doubling to MaxPoll; what names what is waited for in the log.
// It reports whether try was done, and try's error or the context's.
func (l *Loader) Poll(ctx context.Context, what string, try func() (done bool, err error)) (bool, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = DefaultPoll
	if l.FirstPoll > 0 {
		b.InitialInterval = l.FirstPoll
	}
	b.MaxInterval, b.Multiplier, b.MaxElapsedTime = MaxPoll, 2, 0
	b.Reset()
	for {
		done, err := try()
		if done || err != nil {
			return done, err
		}
		left := time.Until(l.WaitUntil)
		if l.WaitUntil.IsZero() || left <= 0 {
			return false, nil
		}
		next := min(b.NextBackOff(), left)
		if l.Log != nil {
			l.Log.Info("input not ready; waiting for it", zap.String("input", Redact(what)),
				zap.Duration("retryIn", next), zap.Duration("waitLeft", left))
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, fmt.Errorf("waiting for input %s: %w", Redact(what), context.Cause(ctx))
		case <-t.C:
		}
	}
}

// Waitable reports whether err means an input is not there yet, or not
// ready: what --wait-for-input waits for.
func Waitable(err error) bool {
	return errors.Is(err, model.ErrNotReady) || errors.Is(err, model.ErrMissing)
}
