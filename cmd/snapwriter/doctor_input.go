package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"

	"google.golang.org/api/googleapi"

	"github.com/snapwriter/snapwriter/input/gcs"
	"github.com/snapwriter/snapwriter/internal/doctor"
	"github.com/snapwriter/snapwriter/internal/storeerr"
)

// datedEntry is what a folder of dated inputs holds: YYYY-MM-DD.json
// files and YYYY-MM-DD/ folders (a local folder's name has no slash).
var datedEntry = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}(\.json|/)?$`)

// Expectations the input check words a problem with.
const (
	wantDated  = "YYYY-MM-DD/ snapshot folders or YYYY-MM-DD.json files"
	wantFolder = "a snapshot folder (manifest.json, metadata.json, district_{id}.json) or a Snapshot JSON file"
)

// inputCheck checks the input --input or --input-dir names, if any.
func (d *preflight) inputCheck(ctx context.Context, earlier doctor.Results) doctor.Result {
	in := d.f.where()
	if in == "" {
		return doctor.Skippedf("no --input or --input-dir given: the input is not checked")
	}
	if !gcs.IsURL(in) {
		return d.localInput(in)
	}
	storageHost, _ := d.a.lookupEnv("STORAGE_EMULATOR_HOST")
	if storageHost == "" && earlier[checkCredentials].Status == doctor.Problem {
		return doctor.Skippedf("because %s failed", checkCredentials)
	}
	ctx, cancel := d.bounded(ctx)
	defer cancel()
	u, _ := gcs.ParseURL(in) // validate parsed it
	store, err := d.a.storage(ctx)
	if err != nil {
		return doctor.Problemf("gcloud auth application-default login", "%v", err)
	}
	w, _ := earlier[checkCredentials].Data.(who)
	if d.f.input != "" && !u.IsPrefix() {
		// An object (a Snapshot JSON), or else a folder without its slash.
		a, err := d.a.gcsClient.Bucket(u.Bucket).Object(u.Name).Attrs(ctx)
		if err == nil {
			return doctor.Okf("%s: object readable (%d bytes)", u, a.Size)
		}
		if !errors.Is(err, fs.ErrNotExist) && !isObjectMissing(err) {
			return d.storageProblem(err, u, w, storageHost)
		}
	}
	entries, err := store.List(ctx, u)
	if err != nil {
		return d.storageProblem(err, u, w, storageHost)
	}
	want, fix := wantFolder, fmt.Sprintf("upload the snapshot to %s (manifest.json last), or correct --input", u.Dir())
	if d.f.inputDir != "" {
		want, fix = wantDated, fmt.Sprintf("upload a day's folder to %s (manifest.json last), or correct --input-dir", u.Dir().Join("YYYY-MM-DD/"))
	}
	first, n := gcs.URL{}, 0
	for _, e := range entries {
		switch {
		case d.f.inputDir != "" && datedEntry.MatchString(e.Name):
			n++
		case d.f.inputDir == "" && (e.Name == "manifest.json" || e.Name == "metadata.json"):
			n++
		default:
			continue
		}
		if first.Bucket == "" {
			first = e.URL
		}
	}
	if n == 0 {
		return doctor.Problemf(fix, "nothing to read under %s (%d other entries): want %s", u.Dir(), len(entries), want)
	}
	if first.IsPrefix() {
		// A dated folder: its first object stands for the folder.
		inner, err := store.List(ctx, first)
		if err != nil || len(inner) == 0 {
			return d.storageProblem(err, first, w, storageHost)
		}
		first = inner[0].URL
	}
	if _, err := d.a.gcsClient.Bucket(first.Bucket).Object(first.Name).Attrs(ctx); err != nil {
		return d.storageProblem(err, first, w, storageHost)
	}
	return doctor.Okf("%s: %d inputs listed, %s readable", u.Dir(), n, first)
}

// isObjectMissing reports whether err is Cloud Storage's "no such object".
func isObjectMissing(err error) bool {
	var g *googleapi.Error
	return errors.As(err, &g) && g.Code == http.StatusNotFound
}

// storageProblem words a failed Cloud Storage request, and its fix.
func (d *preflight) storageProblem(err error, u gcs.URL, w who, host string) doctor.Result {
	if err == nil {
		return doctor.Problemf("upload the snapshot folder's objects", "%s is empty", u)
	}
	member := w.member
	if member == "" {
		member = "serviceAccount:EMAIL"
	}
	var g *googleapi.Error
	var unreachable *storeerr.UnreachableError
	switch {
	case errors.As(err, &g) && g.Code == http.StatusForbidden, errors.As(err, &g) && g.Code == http.StatusUnauthorized:
		return doctor.Problemf(fmt.Sprintf("gcloud storage buckets add-iam-policy-binding gs://%s --member %s --role roles/storage.objectViewer", u.Bucket, member),
			"permission denied reading %s: %v", u, g.Message)
	case errors.Is(err, fs.ErrNotExist):
		return doctor.Problemf(fmt.Sprintf("correct the bucket in the flag, or create it: gcloud storage buckets create gs://%s --location REGION", u.Bucket),
			"bucket %s does not exist (%s)", u.Bucket, gcs.Endpoint(host))
	case errors.As(err, &unreachable), errors.Is(err, context.DeadlineExceeded):
		fix := "check the network path to storage.googleapis.com:443, or give a longer --timeout"
		if host != "" {
			fix = "start the Cloud Storage server or correct STORAGE_EMULATOR_HOST"
		}
		return doctor.Problemf(fix, "no answer from %s: %v", gcs.Endpoint(host), err)
	}
	return doctor.Problemf("see the error", "%v", err)
}

// localInput checks a local input is readable and holds what is expected.
func (d *preflight) localInput(path string) doctor.Result {
	st, err := os.Stat(path)
	if err != nil {
		return doctor.Problemf("correct the path given to --input or --input-dir", "%v", err)
	}
	if !st.IsDir() {
		if d.f.inputDir != "" {
			return doctor.Problemf("give --input-dir a directory (or the file to --input)", "%s is a file, not a directory of %s", path, wantDated)
		}
		f, err := os.Open(path)
		if err != nil {
			return doctor.Problemf(fmt.Sprintf("chmod a+r %s", path), "%v", err)
		}
		_ = f.Close()
		return doctor.Okf("%s: file readable (%d bytes)", path, st.Size())
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return doctor.Problemf(fmt.Sprintf("chmod a+rx %s", path), "%v", err)
	}
	n := 0
	for _, e := range entries {
		name := e.Name()
		if d.f.inputDir != "" && datedEntry.MatchString(name) && (e.IsDir() || filepath.Ext(name) == ".json") ||
			d.f.inputDir == "" && (name == "manifest.json" || name == "metadata.json") {
			n++
		}
	}
	if n == 0 {
		want, flag := wantFolder, "--input"
		if d.f.inputDir != "" {
			want, flag = wantDated, "--input-dir"
		}
		return doctor.Problemf(fmt.Sprintf("put the inputs in %s, or correct %s", path, flag), "nothing to read in %s (%d other entries): want %s", path, len(entries), want)
	}
	return doctor.Okf("%s: directory readable, %d inputs", path, n)
}
