package model

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/snapwriter/snapwriter/internal/safego"
)

// A snapshot read from a file keeps its districts' data in the file:
// decoded whole, a district's object tree takes about 13 times its JSON,
// so a snapshot of thousands of districts would take gigabytes. One
// streaming pass decodes everything else, and checks, hashes and sizes
// each district's data one district at a time; the data is read back, and
// decoded again, only when it is needed (DistrictStatistics.Data).

// lazyInput is what a lazily read snapshot's districts are read back from.
type lazyInput struct {
	f      *os.File  // the input file; nil for a snapshot directory, whose districts name their own files
	dir    *dirInput // the snapshot directory, nil for an input file
	closer io.Closer // closed by Close: the snapshot directory's fs.FS, when it is one
	name   string    // for errors
	remove string    // a spooled file to remove on Close, if it could not be removed at once
	loads  atomic.Int64
}

// lazyData is where a district's data lies in the input, and what reading
// it found.
type lazyData struct {
	in     *lazyInput
	path   string // the district's own file's name in in.dir (snapshot directory), else in.f
	off, n int64
	// rawSum is the SHA-256 of the bytes, so that a file changed after it
	// was checked is refused instead of stored under the old hashes.
	rawSum  [sha256.Size]byte
	summary DataSummary
	// problems are checkValue's, their paths relative to the district.
	problems []Problem
	// head holds the data's districtId and asOfDate as they were.
	head Object
}

// DataSummary is what a writer needs of a district's data before writing
// it: its hash and sizes.
type DataSummary struct {
	// Digest is the SHA-256 of the data's canonical JSON (Marshal).
	Digest [sha256.Size]byte
	// FirestoreSize is the data's FirestoreSize.
	FirestoreSize int
	// EncodedSize is the data's EncodedSize.
	EncodedSize int
	// NoWholeDoubles: the data holds no double that equals an integer
	// (IntegerValue: 39.0, -0.0), so that comparing it as Firestore
	// compares numbers needs no more than Digest, and data left in its
	// file need not be read back for it.
	NoWholeDoubles bool
}

// Lazy reports whether the district's data is left in the input file,
// to be read back by Data.
func (d DistrictStatistics) Lazy() bool { return d.data == nil && d.lazy != nil }

// Data returns the district's data: the object it holds in memory (not a
// copy), or for a lazily read district (Lazy) its object read back from
// the input file and decoded. Each call reads and decodes a lazy
// district's data again, so that nothing holds it longer than its caller
// does; it fails when the file was closed (Snapshot.Close) or changed
// since it was read. A district built with neither (a DistrictStatistics
// literal) has no data: nil.
func (d DistrictStatistics) Data() (Object, error) {
	if !d.Lazy() {
		return d.data, nil
	}
	return d.lazy.load()
}

// LoadData is Data.
//
// Deprecated: use Data.
func (d DistrictStatistics) LoadData() (Object, error) { return d.Data() }

// Summary returns the district data's hash and sizes: found when it was
// read for a lazily read district; for one in memory, by walking its data
// once (Prepare finds all of a snapshot's in the walk that validates it).
func (d DistrictStatistics) Summary() (DataSummary, error) {
	if d.Lazy() {
		return d.lazy.summary, nil
	}
	sc := scratchPool.Get().(*summaryScratch)
	defer scratchPool.Put(sc)
	sum, _, err := summarizeData(d.data, "", nil, sc)
	return sum, err
}

// DataLoads reports how many times Data has read a district of s back
// from its input: zero for a snapshot held in memory.
func (s *Snapshot) DataLoads() int64 {
	if s.lazy == nil {
		return 0
	}
	return s.lazy.loads.Load()
}

// Close releases the input file a snapshot read by Open or Spool keeps its
// districts in; Data fails after it. It is a no-op for other
// snapshots.
func (s *Snapshot) Close() error {
	if s.lazy == nil {
		return nil
	}
	if s.lazy.closer != nil {
		return s.lazy.closer.Close()
	}
	if s.lazy.f == nil {
		return nil
	}
	err := s.lazy.f.Close()
	if s.lazy.remove != "" {
		if rerr := os.Remove(s.lazy.remove); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

func (l *lazyData) load() (Object, error) {
	l.in.loads.Add(1)
	name := l.in.name
	src := io.ReaderAt(l.in.f)
	if l.path != "" {
		f, err := l.in.dir.open(l.path)
		if err != nil {
			return nil, fmt.Errorf("reading district data back: %w", err)
		}
		defer f.Close()
		src, name = f, l.in.dir.path(l.path)
	}
	raw := make([]byte, l.n)
	if _, err := src.ReadAt(raw, l.off); err != nil {
		return nil, fmt.Errorf("reading district data back from %s: %w", name, err)
	}
	if sha256.Sum256(raw) != l.rawSum {
		return nil, fmt.Errorf("%s changed after it was read: its district data at byte %d is not what was checked", name, l.off)
	}
	v, err := decodeBytes(raw, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: district data at byte %d is %s, not an object", name, l.off, kindOf(v))
	}
	return o, nil
}

// newLazyData is where district data o, the bytes start to end of the
// input (path, else in.f), lies; summarize completes it.
func newLazyData(in *lazyInput, path string, o Object, start, end int64) *lazyData {
	l := &lazyData{in: in, path: path, off: start, n: end - start, head: Object{}}
	for _, k := range []string{"districtId", "asOfDate"} {
		if v, ok := o[k]; ok {
			l.head[k] = v
		}
	}
	return l
}

// summarize checks, hashes and sizes l's data o, read from src, in one
// walk (summarizeData).
func (l *lazyData) summarize(src io.ReaderAt, o Object, sc *summaryScratch) error {
	if int64(cap(sc.raw)) < l.n {
		sc.raw = make([]byte, l.n)
	}
	raw := sc.raw[:l.n]
	if _, err := src.ReadAt(raw, l.off); err != nil {
		return fmt.Errorf("reading input: %w", err)
	}
	l.rawSum = sha256.Sum256(raw)
	sum, _, err := summarizeData(o, "", func(path, format string, args ...any) {
		l.problems = append(l.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}, sc)
	if err != nil {
		return fmt.Errorf("hashing district data: %w", err)
	}
	l.summary = sum
	return nil
}

// summarizer summarizes districts' data on up to GOMAXPROCS goroutines
// while the input is still being decoded: decoding is one sequential pass
// over the tokens, and checking, sizing and hashing each district's data
// is as much work again, which the other cores do meanwhile. Each
// district's results go to its own lazyData, so they are what a
// sequential pass finds, in input order.
type summarizer struct {
	g       errgroup.Group
	scratch chan *summaryScratch
	// errs holds each district's error, in input order: the slice is
	// appended to by the decoding goroutine only, each error written by
	// its district's goroutine only.
	errs []*error
}

func newSummarizer() *summarizer {
	n := runtime.GOMAXPROCS(0)
	s := &summarizer{scratch: make(chan *summaryScratch, n)}
	for range n {
		s.scratch <- new(summaryScratch)
	}
	// The limit also bounds the decoded districts held at once.
	s.g.SetLimit(n)
	return s
}

// add summarizes l's data o, read from src, on a goroutine of its own; it
// waits while GOMAXPROCS districts are being summarized.
func (s *summarizer) add(l *lazyData, src io.ReaderAt, o Object) {
	errp := new(error)
	s.errs = append(s.errs, errp)
	s.g.Go(safego.Func(func() error {
		sc := <-s.scratch
		defer func() { s.scratch <- sc }()
		*errp = l.summarize(src, o, sc)
		return nil
	}))
}

// wait waits for every district added and returns the error of the first
// one, in input order, that failed.
func (s *summarizer) wait() error {
	safego.Repanic(s.g.Wait()) // the goroutines report through errs; a panic is raised again here, in the caller
	for _, e := range s.errs {
		if *e != nil {
			return *e
		}
	}
	return nil
}

// Open reads the Snapshot JSON file at path, leaving its districts' data
// in the file (see DistrictStatistics.Data) until Close. It checks the
// file as Decode does; a file that cannot be read at an offset (a pipe) is
// spooled first.
func Open(path string) (*Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, inputErr(path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, inputErr(path, err)
	}
	if !fi.Mode().IsRegular() {
		defer f.Close()
		return Spool(f)
	}
	return decodeLazy(f, path)
}

// Spool copies r into a temporary file and reads it as Open does. The
// file is removed at once (it lives on while open, on systems that allow
// it), else by Close.
func Spool(r io.Reader) (*Snapshot, error) {
	f, err := os.CreateTemp("", "snapwriter-input-*.json")
	if err != nil {
		return nil, fmt.Errorf("spooling input: %w", err)
	}
	// Removed while open, the file lives on until closed, and nothing is
	// left behind however the process ends.
	removed := os.Remove(f.Name()) == nil
	s, err := spool(f, r)
	switch {
	case removed:
	case err != nil:
		os.Remove(f.Name())
	default:
		s.lazy.remove = f.Name()
	}
	return s, err
}

func spool(f *os.File, r io.Reader) (*Snapshot, error) {
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return nil, fmt.Errorf("reading input: %w", err)
	}
	return decodeLazy(f, "the input")
}

// decodeLazy decodes f as Open does, and keeps f for Data; f is closed
// when it fails.
func decodeLazy(f *os.File, name string) (*Snapshot, error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("reading input: %w", err)
	}
	in := &lazyInput{f: f, name: name}
	src := io.NewSectionReader(f, 0, fi.Size())
	rd := bufio.NewReaderSize(io.NewSectionReader(f, 0, fi.Size()), 64<<10)
	sum := newSummarizer()
	v, err := decodeSource(src, rd, func(d *decoder, o Object, start, end int64) (any, error) {
		if !districtPath(d.steps) {
			return o, nil
		}
		l := newLazyData(in, "", o, start, end)
		sum.add(l, src, o)
		return l, nil
	})
	// The districts' goroutines read f: wait for them before anything
	// closes it. A district that could not be summarized comes before
	// anything the decoder found after it.
	if serr := sum.wait(); serr != nil {
		err = serr
	}
	if err == nil {
		if _, ok := v.(map[string]any); !ok {
			err = invalid("$", "want a JSON object, got %s", kindOf(v))
		}
	}
	var s *Snapshot
	if err == nil {
		s, err = fromTree(v.(map[string]any))
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	s.lazy = in
	return s, nil
}

// districtPath reports whether steps is the path of a district:
// $.payload.districts[i].
func districtPath(steps []pathElem) bool {
	return len(steps) == 3 && steps[0].isKey && steps[0].key == "payload" &&
		steps[1].isKey && steps[1].key == "districts" && !steps[2].isKey
}

// readDistrictFile reads the district file name of a snapshot directory:
// the stored envelope {districtId, …, data} or bare DistrictStatistics.
// Its problems' paths name the file, as readObject's do.
func readDistrictFile(in *lazyInput, name string, sc *summaryScratch) (*lazyData, error) {
	path := in.dir.path(name)
	f, err := in.dir.open(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, &MissingError{Msg: fmt.Sprintf("%v: %s does not exist", ErrInvalid, path)}
		}
		return nil, inputErr(path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, inputErr(path, err)
	}
	src := io.NewSectionReader(f, 0, fi.Size())
	var whole, data [2]int64 // the offsets of the file's object and of its data member
	v, err := decodeSource(src, bufio.NewReaderSize(io.NewSectionReader(f, 0, fi.Size()), 64<<10),
		func(d *decoder, o Object, start, end int64) (any, error) {
			switch {
			case len(d.steps) == 0:
				whole = [2]int64{start, end}
			case len(d.steps) == 1 && d.steps[0].isKey && d.steps[0].key == "data":
				data = [2]int64{start, end}
			}
			return o, nil
		})
	if err == nil {
		if _, ok := v.(map[string]any); !ok {
			err = invalid("$", "want a JSON object, got %s", kindOf(v))
		}
	}
	if err != nil {
		return nil, fileProblems(path, err)
	}
	o := v.(map[string]any)
	// The application's file store wraps statistics in the same envelope
	// as its Firestore documents.
	var l *lazyData
	if d, ok := o["data"].(map[string]any); ok && o["membership"] == nil {
		l = newLazyData(in, name, d, data[0], data[1])
		o = d
	} else {
		l = newLazyData(in, name, o, whole[0], whole[1])
	}
	if err := l.summarize(src, o, sc); err != nil {
		return nil, err
	}
	return l, nil
}

// dirFile is a file of a snapshot directory, read at offsets.
type dirFile interface {
	io.ReaderAt
	Stat() (fs.FileInfo, error)
	Close() error
}

// open opens the file name of the directory for reading at offsets: an
// fs.FS whose files cannot be read at an offset has them read whole.
func (d *dirInput) open(name string) (dirFile, error) {
	f, err := d.fsys.Open(name)
	if err != nil {
		return nil, err
	}
	if df, ok := f.(dirFile); ok {
		return df, nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return bytesFile{bytes.NewReader(b), fi}, nil
}

// bytesFile is a file of an fs.FS read whole into memory.
type bytesFile struct {
	*bytes.Reader
	fi fs.FileInfo
}

func (b bytesFile) Stat() (fs.FileInfo, error) { return b.fi, nil }
func (b bytesFile) Close() error               { return nil }
