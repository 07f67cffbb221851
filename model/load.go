package model

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/snapwriter/snapwriter/internal/safego"
)

// inputErr says that the input file at path cannot be opened.
func inputErr(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: input %s does not exist", ErrInvalid, path)
	}
	return fmt.Errorf("%w: input %s: %w", ErrInvalid, path, err)
}

// LoadDir reads a per-district snapshot directory as the application stores
// it on disk: metadata.json (PerDistrictSnapshotMetadata), manifest.json
// (SnapshotManifest; its order and statuses pick the district files),
// district_{id}.json per district (the stored envelope {districtId, …,
// data} or bare DistrictStatistics), and an optional
// all-districts-rankings.json. Without manifest.json every district_*.json
// is read, in name order. Each district's data stays in its file until it
// is needed (DistrictStatistics.Data).
func LoadDir(dir string) (*Snapshot, error) {
	return LoadFS(os.DirFS(dir), filepath.Clean(dir))
}

// LoadFS reads a per-district snapshot directory, as LoadDir does, from the
// top of fsys: a local directory, or a copy of a Cloud Storage folder.
// Messages name a file as root joined with its name (root + name when root
// ends in "/", as a gs:// prefix does). A district's data is read back from
// fsys when it is needed, so fsys must serve the same bytes until the
// snapshot is closed; when fsys is an io.Closer, Close closes it.
func LoadFS(fsys fs.FS, root string) (*Snapshot, error) {
	d := dirInput{fsys: fsys, root: root}
	md, err := d.readObject("metadata.json")
	if err != nil {
		return nil, err
	}
	var p problems
	files, err := d.districtFiles(&p)
	if err != nil {
		return nil, err
	}
	// Each district's data stays in its file until it is needed (see
	// Open). The files are read GOMAXPROCS at a time, each into its own
	// slot, and their problems merged in manifest order, as one pass
	// would find them.
	in := &lazyInput{name: root, dir: &d}
	if c, ok := fsys.(io.Closer); ok {
		in.closer = c
	}
	read := make([]*lazyData, len(files))
	errs := make([]error, len(files))
	n := runtime.GOMAXPROCS(0)
	scratch := make(chan *summaryScratch, n)
	for range n {
		scratch <- new(summaryScratch)
	}
	var g errgroup.Group
	g.SetLimit(n)
	for i, f := range files {
		g.Go(safego.Func(func() error {
			sc := <-scratch
			defer func() { scratch <- sc }()
			read[i], errs[i] = readDistrictFile(in, f, sc)
			return nil
		}))
	}
	safego.Repanic(g.Wait()) // the files report through errs; a panic is raised again here, in the caller
	districts := make([]any, 0, len(files))
	for i, d := range read {
		if err := errs[i]; err != nil {
			if !p.merge(err) {
				return nil, err
			}
			continue
		}
		districts = append(districts, d)
	}
	var rankings any
	rk, err := d.readObject("all-districts-rankings.json")
	switch {
	case err == nil:
		rankings = rk
	case errors.Is(err, fs.ErrNotExist):
	case !p.merge(err):
		return nil, err
	}
	if err := p.err(); err != nil {
		return nil, fmt.Errorf("%s: %w", root, err)
	}

	pm := Object{
		"source":               orZero(md["source"], ""),
		"fetchedAt":            orZero(md["createdAt"], ""),
		"dataAsOfDate":         orZero(md["dataAsOfDate"], ""),
		"districtCount":        int64(len(districts)),
		"processingDurationMs": orZero(md["processingDuration"], int64(0)),
	}
	for _, k := range []string{"configuredDistricts", "successfulDistricts", "failedDistricts",
		"districtErrors", "isClosingPeriodData", "collectionDate", "logicalDate"} {
		if v, ok := md[k]; ok {
			pm[k] = v
		}
	}
	tree := Object{
		"snapshot_id":         orZero(md["snapshotId"], ""),
		"created_at":          orZero(md["createdAt"], ""),
		"schema_version":      orZero(md["schemaVersion"], ""),
		"calculation_version": orZero(md["calculationVersion"], ""),
		"status":              orZero(md["status"], ""),
		"errors":              orZero(md["errors"], []any{}),
		"payload":             Object{"districts": districts, "metadata": pm},
	}
	if rankings != nil {
		tree["rankings"] = rankings
	}
	s, err := fromTree(tree)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", root, err)
	}
	s.lazy = in
	return s, nil
}

// dirInput is the snapshot directory LoadFS reads: fsys, named root in
// messages.
type dirInput struct {
	fsys fs.FS
	root string
}

// path names the file name of the directory in a message.
func (d *dirInput) path(name string) string {
	if strings.HasSuffix(d.root, "/") {
		return d.root + name
	}
	return filepath.Join(d.root, name)
}

// districtFiles lists the district files to read, in manifest order.
func (d *dirInput) districtFiles(p *problems) ([]string, error) {
	mf, err := d.readObject("manifest.json")
	if errors.Is(err, fs.ErrNotExist) {
		names, err := fs.Glob(d.fsys, "district_*.json")
		if err != nil {
			return nil, err
		}
		sort.Strings(names)
		return names, nil
	}
	if err != nil {
		return nil, err
	}
	// An upload in progress; an export without the field predates it.
	if v, ok := mf["writeComplete"]; ok && v != true {
		if v == false {
			return nil, fmt.Errorf("%w: %s: its upload has not finished: manifest.json says writeComplete: false", ErrNotReady, d.root)
		}
		p.add("manifest.json: $.writeComplete", "want true or false, got %s", kindOf(v))
	}
	entries, ok := mf["districts"].([]any)
	if !ok {
		p.add("manifest.json: $.districts", "want an array of entries, got %s", kindOf(mf["districts"]))
		return nil, nil
	}
	var files []string
	for i, e := range entries {
		m, _ := e.(map[string]any)
		id, _ := m["districtId"].(string)
		if id == "" {
			p.add(fmt.Sprintf("manifest.json: $.districts[%d].districtId", i), "missing")
			continue
		}
		// The application lists failed districts too; they have no file.
		if st, _ := m["status"].(string); st == "failed" {
			continue
		}
		name, _ := m["fileName"].(string)
		if name == "" {
			name = "district_" + id
		}
		if !strings.HasSuffix(name, ".json") {
			name += ".json"
		}
		if name != filepath.Base(name) || !fs.ValidPath(name) {
			p.add(fmt.Sprintf("manifest.json: $.districts[%d].fileName", i), "%q is not a file name in the directory", name)
			continue
		}
		files = append(files, name)
	}
	return files, nil
}

// readObject reads the JSON object file name. A missing file is a
// *MissingError.
func (d *dirInput) readObject(name string) (Object, error) {
	path := d.path(name)
	f, err := d.fsys.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &MissingError{Msg: fmt.Sprintf("%v: %s does not exist", ErrInvalid, path)}
		}
		return nil, inputErr(path, err)
	}
	defer f.Close()
	o, err := DecodeObject(f)
	if err != nil {
		return nil, fileProblems(path, err)
	}
	return o, nil
}

// fileProblems names the file at path in err's problems.
func fileProblems(path string, err error) error {
	var ve *ValidationError
	if errors.As(err, &ve) {
		for i := range ve.Problems {
			ve.Problems[i].Path = filepath.Base(path) + ": " + ve.Problems[i].Path
		}
		return ve
	}
	return fmt.Errorf("%w: %s: %w", ErrInvalid, path, err)
}

func orZero(v, zero any) any {
	if v == nil {
		return zero
	}
	return v
}
