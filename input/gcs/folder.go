package gcs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/storage"
	"golang.org/x/sync/errgroup"

	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/internal/safego"
	"github.com/snapwriter/snapwriter/model"
)

// manifestName is the file whose writeComplete says an upload finished.
const manifestName = "manifest.json"

// loadFolder reads the snapshot folder dir. It lists the folder once, and
// reads every object at the generation that listing saw: an object
// replaced or deleted since is gone at that generation, and the read
// fails rather than mix two uploads. Every object is copied to one
// temporary file (removed at once; it lives while the snapshot is open)
// before anything is decoded, so that what is written is what was read,
// whatever the bucket does meanwhile, and the districts' data is read back
// from that copy as from a local directory (model.LoadFS).
func (s *Store) loadFolder(ctx context.Context, dir URL) (*model.Snapshot, error) {
	objects := map[string]object{}
	subfolders := 0
	err := s.list(ctx, dir, func(a *storage.ObjectAttrs) {
		if a.Prefix != "" {
			subfolders++
			return
		}
		name := strings.TrimPrefix(a.Name, dir.Name)
		if name != "" && strings.HasSuffix(name, ".json") {
			objects[name] = object{name: name, generation: a.Generation, size: a.Size}
		}
	})
	if err != nil {
		return nil, err
	}
	if s.afterList != nil {
		s.afterList()
	}
	mf, ok := objects[manifestName]
	if !ok {
		return nil, folderWithout(dir, objects, subfolders)
	}
	manifest, err := s.download(ctx, dir, mf)
	if err != nil {
		return nil, err
	}
	m, err := model.DecodeObject(bytes.NewReader(manifest))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", model.ErrInvalid, dir.Join(manifestName), err)
	}
	if done, _ := m["writeComplete"].(bool); !done {
		return nil, fmt.Errorf("%w: %s: its upload has not finished: %s does not say writeComplete: true (the uploader sets it last)",
			model.ErrNotReady, dir, manifestName)
	}
	sp, err := newSpool()
	if err != nil {
		return nil, err
	}
	if err := sp.add(manifestName, manifest); err != nil {
		sp.Close()
		return nil, err
	}
	if err := s.spoolAll(ctx, dir, objects, sp); err != nil {
		sp.Close()
		return nil, err
	}
	snap, err := model.LoadFS(sp, dir.String())
	if err != nil {
		sp.Close()
		return nil, err
	}
	return snap, nil
}

// folderWithout says why a folder without manifest.json is not read: with
// other snapshot files it is an upload in progress (not ready); with none
// it holds no snapshot, or does not exist.
func folderWithout(dir URL, objects map[string]object, subfolders int) error {
	snapshotFiles := 0
	for name := range objects {
		if name == "metadata.json" || strings.HasPrefix(name, "district_") || name == "all-districts-rankings.json" {
			snapshotFiles++
		}
	}
	switch {
	case snapshotFiles > 0:
		return fmt.Errorf("%w: %s: its upload has not finished: %s but no %s yet (the uploader writes it last)",
			model.ErrNotReady, dir, plural.N(snapshotFiles, "snapshot file"), manifestName)
	case len(objects) == 0 && subfolders == 0:
		return &model.MissingError{Msg: fmt.Sprintf("%v: input %s does not exist: no object lies under it", model.ErrInvalid, dir), Input: true}
	case subfolders > 0:
		return fmt.Errorf("%w: %s holds no snapshot (no metadata.json, %s or district files) but %s: name one snapshot's folder, or give the parent to backfill --input-dir",
			model.ErrInvalid, dir, manifestName, plural.N(subfolders, "sub-folder"))
	}
	return fmt.Errorf("%w: %s holds no snapshot: of its %s, none is metadata.json, %s or a district file",
		model.ErrInvalid, dir, plural.N(len(objects), "JSON object"), manifestName)
}

// spoolAll copies the folder's objects but the manifest into sp, each at
// its listed generation, s.workers at a time.
func (s *Store) spoolAll(ctx context.Context, dir URL, objects map[string]object, sp *spool) error {
	names := make([]string, 0, len(objects))
	for name := range objects {
		if name != manifestName {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.workers)
	for _, name := range names {
		g.Go(safego.Func(func() error {
			b, err := s.download(gctx, dir, objects[name])
			if err != nil {
				return err
			}
			return sp.add(name, b)
		}))
	}
	err := g.Wait()
	safego.Repanic(err) // in the caller's goroutine, which the CLI recovers: not taken for an input's error
	return err
}

// download reads the object o of dir at its listed generation, whole.
func (s *Store) download(ctx context.Context, dir URL, o object) ([]byte, error) {
	u := dir.Join(o.name)
	if o.size > MaxObjectBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes, over the %d a snapshot folder's file may have", model.ErrInvalid, u, o.size, MaxObjectBytes)
	}
	wd := s.watch(ctx)
	defer wd.stop()
	r, err := s.client.Bucket(u.Bucket).Object(u.Name).Generation(o.generation).NewReader(wd.ctx)
	if err != nil {
		return nil, s.readErr(wd, u, o.generation, err)
	}
	defer r.Close()
	body := &watchedReader{r: r, wd: wd, limit: MaxObjectBytes}
	var buf bytes.Buffer
	// ReadFrom wants bytes.MinRead spare: without it, it doubles the buffer.
	buf.Grow(int(o.size) + bytes.MinRead)
	if _, err := buf.ReadFrom(body); err != nil {
		if body.err != nil {
			err = body.err
		}
		return nil, s.readErr(wd, u, o.generation, err)
	}
	return buf.Bytes(), nil
}

// spool is a read-only fs.FS of files held in one temporary file: the
// copy of a folder that model.LoadFS reads, and reads its districts back
// from, until Close.
type spool struct {
	f     *os.File
	mu    sync.Mutex
	end   int64
	files map[string]spooled
}

type spooled struct{ off, size int64 }

// newSpool creates the spool's file and removes it at once: it lives
// while open, and nothing is left behind however the process ends.
func newSpool() (*spool, error) {
	f, err := os.CreateTemp("", "snapwriter-gcs-*.spool")
	if err != nil {
		return nil, fmt.Errorf("spooling input: %w", err)
	}
	_ = os.Remove(f.Name())
	return &spool{f: f, files: map[string]spooled{}}, nil
}

// add appends the file name with content b.
func (s *spool) add(name string, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.f.WriteAt(b, s.end); err != nil {
		return fmt.Errorf("spooling input: %w", err)
	}
	s.files[name] = spooled{off: s.end, size: int64(len(b))}
	s.end += int64(len(b))
	return nil
}

// Close closes (and so frees) the spool's file.
func (s *spool) Close() error { return s.f.Close() }

// Open opens a spooled file, or "." (the folder, for fs.Glob).
func (s *spool) Open(name string) (fs.File, error) {
	if name == "." {
		return &spoolDir{s: s}, nil
	}
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	e, ok := s.files[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &spoolFile{SectionReader: io.NewSectionReader(s.f, e.off, e.size), info: spoolInfo{name: name, size: e.size}}, nil
}

// ReadDir lists the spooled files (fs.ReadDirFS, for fs.Glob).
func (s *spool) ReadDir(name string) ([]fs.DirEntry, error) {
	if name != "." {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	out := make([]fs.DirEntry, 0, len(s.files))
	for n, e := range s.files {
		out = append(out, fs.FileInfoToDirEntry(spoolInfo{name: n, size: e.size}))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

type spoolFile struct {
	*io.SectionReader
	info spoolInfo
}

func (f *spoolFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *spoolFile) Close() error               { return nil }

type spoolDir struct{ s *spool }

func (d *spoolDir) Stat() (fs.FileInfo, error) { return spoolInfo{name: ".", dir: true}, nil }
func (d *spoolDir) Read([]byte) (int, error)   { return 0, errors.New("is a directory") }
func (d *spoolDir) Close() error               { return nil }

type spoolInfo struct {
	name string
	size int64
	dir  bool
}

func (i spoolInfo) Name() string { return i.name }
func (i spoolInfo) Size() int64  { return i.size }
func (i spoolInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (i spoolInfo) ModTime() time.Time { return time.Time{} }
func (i spoolInfo) IsDir() bool        { return i.dir }
func (i spoolInfo) Sys() any           { return nil }
