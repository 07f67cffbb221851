package input

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/model"
)

// folder writes a snapshot folder whose manifest says writeComplete:
// done, and returns it with the func that marks it complete.
func folder(t *testing.T, done bool) (string, func()) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "2026-11-20")
	if err := model.WriteFolder(model.Generate("2026-11-20", 3, 1), dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "manifest.json")
	complete, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	staging := t.TempDir()
	mark := func() {
		if err := writeAtomically(staging, path, complete); err != nil {
			t.Error(err)
		}
	}
	if !done {
		if err := os.WriteFile(path, []byte(strings.Replace(string(complete), `"writeComplete":true`, `"writeComplete":false`, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, mark
}

// writeAtomically writes b to path as an uploader does (gsutil, a
// rename into place): a reader sees the old file or the whole new one,
// never the empty file os.WriteFile truncates to before it writes. The
// loader's poll runs at any moment, so a test that wrote in place would
// sometimes hand it half a manifest. The temporary file is made in
// staging, not beside path, where a folder's listing would see it.
func writeAtomically(staging, path string, b []byte) error {
	f, err := os.CreateTemp(staging, "upload-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// An input that is not ready is waited for until it is, and read then.
func TestLoaderWaits(t *testing.T) {
	t.Parallel()
	dir, mark := folder(t, false)
	l := &Loader{WaitUntil: time.Now().Add(time.Minute), FirstPoll: 10 * time.Millisecond}
	time.AfterFunc(100*time.Millisecond, mark)
	snap, err := l.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	snap.Close()

	// A missing input too: it may be on its way.
	missing := filepath.Join(t.TempDir(), "later.json")
	b, _ := model.Generate("2026-11-21", 2, 1).MarshalJSON()
	staging := t.TempDir()
	time.AfterFunc(100*time.Millisecond, func() {
		if err := writeAtomically(staging, missing, b); err != nil {
			t.Error(err)
		}
	})
	l = &Loader{WaitUntil: time.Now().Add(time.Minute), FirstPoll: 10 * time.Millisecond}
	if snap, err := l.Load(context.Background(), missing); err != nil {
		t.Errorf("missing, then written: %v", err)
	} else {
		snap.Close()
	}
}

// Without a wait, or once it has passed, an input not ready is refused as
// not ready; a missing one waited for in vain is not ready too, and
// invalid input is never waited for.
func TestLoaderRefuses(t *testing.T) {
	t.Parallel()
	dir, _ := folder(t, false)
	if _, err := (&Loader{}).Load(context.Background(), dir); !errors.Is(err, model.ErrNotReady) {
		t.Errorf("no wait: %v", err)
	}
	t0 := time.Now()
	l := &Loader{WaitUntil: time.Now().Add(200 * time.Millisecond), FirstPoll: 10 * time.Millisecond}
	_, err := l.Load(context.Background(), dir)
	if !errors.Is(err, model.ErrNotReady) || !strings.Contains(err.Error(), "waited") {
		t.Errorf("wait passed: %v", err)
	}
	if d := time.Since(t0); d < 200*time.Millisecond || d > 10*time.Second {
		t.Errorf("waited %s for a 200ms wait", d)
	}
	l = &Loader{WaitUntil: time.Now().Add(100 * time.Millisecond), FirstPoll: 10 * time.Millisecond}
	_, err = l.Load(context.Background(), filepath.Join(t.TempDir(), "never.json"))
	if !errors.Is(err, model.ErrNotReady) || !errors.Is(err, model.ErrMissing) {
		t.Errorf("missing, waited in vain: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	l = &Loader{WaitUntil: time.Now().Add(time.Hour)}
	if _, err := l.Load(context.Background(), bad); !errors.Is(err, model.ErrInvalid) || errors.Is(err, model.ErrNotReady) || time.Since(t0) > 5*time.Second {
		t.Errorf("invalid input: %v after %s", err, time.Since(t0))
	}
}

// A wait ends with the context.
func TestLoaderWaitCancelled(t *testing.T) {
	t.Parallel()
	dir, _ := folder(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	l := &Loader{WaitUntil: time.Now().Add(time.Hour), FirstPoll: 10 * time.Millisecond}
	if _, err := l.Load(ctx, dir); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v", err)
	}
}

// gs:// inputs need Cloud Storage: without it they are refused, and a
// malformed URL is bad input, never looked for on disk.
func TestLoaderGCSWithoutStorage(t *testing.T) {
	t.Parallel()
	if _, err := (&Loader{}).Load(context.Background(), "gs://exports/x/"); !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "Cloud Storage") {
		t.Errorf("no storage: %v", err)
	}
	if _, err := (&Loader{}).Load(context.Background(), "gs:/exports/x"); !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "not a Cloud Storage URL") {
		t.Errorf("malformed: %v", err)
	}
}
