package gcs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/gcsserver"
	"github.com/snapwriter/snapwriter/input/gcs"
	"github.com/snapwriter/snapwriter/internal/storeerr"
	"github.com/snapwriter/snapwriter/model"
)

const bucket = "exports"

// fixture is a Cloud Storage server holding one snapshot folder, and a
// local copy of the same folder.
type fixture struct {
	srv   *gcsserver.Server
	store *gcs.Store
	local string // the folder on disk
}

func newFixture(t *testing.T, districts int) *fixture {
	t.Helper()
	srv, err := gcsserver.Start(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucket(bucket)
	local := filepath.Join(t.TempDir(), "2026-11-20")
	if err := model.WriteFolder(model.Generate("2026-11-20", districts, 3), local); err != nil {
		t.Fatal(err)
	}
	if err := srv.PutDir(bucket, "snapshots/2026-11-20/", local, "manifest.json"); err != nil {
		t.Fatal(err)
	}
	client, err := srv.Client(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return &fixture{srv: srv, store: gcs.NewStore(client, srv.Host, gcs.WithTimeout(2*time.Second, "")), local: local}
}

func (f *fixture) put(t *testing.T, name string, content string) {
	t.Helper()
	f.srv.Put(bucket, "snapshots/2026-11-20/"+name, []byte(content))
}

func mustURL(t *testing.T, s string) gcs.URL {
	t.Helper()
	u, err := gcs.ParseURL(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestParseURL(t *testing.T) {
	good := map[string]gcs.URL{
		"gs://exports/snapshots/2026-11-20/":     {"exports", "snapshots/2026-11-20/"},
		"gs://exports/snapshots/2026-11-20.json": {"exports", "snapshots/2026-11-20.json"},
		"gs://exports":                           {"exports", ""},
		"gs://my-bucket_1.example.com/a":         {"my-bucket_1.example.com", "a"},
	}
	for in, want := range good {
		if got, err := gcs.ParseURL(in); err != nil || got != want {
			t.Errorf("gcs.ParseURL(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	bad := map[string]string{
		"gs:/exports/x":       "want gs://BUCKET/PATH",
		"gs://":               "no bucket",
		"gs:///x":             "no bucket",
		"gs://Exports/x":      "not a valid bucket name",
		"gs://ab/x":           "not a valid bucket name",
		"gs://exports/a//b":   "empty path segment",
		"gs://exports/a/../b": "path segment",
		"gs://exports/a?x=1":  "query",
		"gs://exports/a\nb":   "control character",
		"gs://-exports/x":     "not a valid bucket name",
		"gs://exp..orts/x":    "not a valid bucket name",
		"GS://exports/x":      "want gs://BUCKET/PATH",
		"gs://exports/" + strings.Repeat("a", 1025): "over 1,024 bytes",
	}
	for in, want := range bad {
		_, err := gcs.ParseURL(in)
		if !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("gcs.ParseURL(%q): %v; want ErrInvalid saying %q", in, err, want)
		}
		if !gcs.IsURL(in) {
			t.Errorf("gcs.IsURL(%q) = false: it would be looked for on disk", in)
		}
	}
}

// A folder reads as the same folder on disk reads, value for value, and
// its districts' data is read back from the spool, not the bucket.
func TestLoadFolderEqualsLocal(t *testing.T) {
	f := newFixture(t, 120)
	want, err := model.LoadDir(f.local)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	for _, u := range []string{"gs://exports/snapshots/2026-11-20/", "gs://exports/snapshots/2026-11-20"} {
		got, err := f.store.Load(context.Background(), mustURL(t, u))
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if d := model.Diff(want, got); d != "" {
			t.Errorf("%s differs from the local folder: %s", u, d)
		}
		// The bucket may change now: the snapshot was read.
		f.put(t, "district_"+got.Payload.Districts[0].DistrictID+".json", `{"changed": true}`)
		if _, err := got.Payload.Districts[0].Data(); err != nil {
			t.Errorf("%s: data read back after the bucket changed: %v", u, err)
		}
		got.Close()
		f = newFixture(t, 120)
	}
}

func TestLoadObject(t *testing.T) {
	f := newFixture(t, 3)
	snap := model.Generate("2026-11-21", 7, 1)
	b, err := snap.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Put(bucket, "snapshots/2026-11-21.json", b)
	got, err := f.store.Load(context.Background(), mustURL(t, "gs://exports/snapshots/2026-11-21.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if d := model.Diff(snap, got); d != "" {
		t.Error(d)
	}
}

// An upload in progress is not ready: no manifest yet, or a manifest that
// does not say writeComplete: true (absent means incomplete).
func TestFolderNotReady(t *testing.T) {
	cases := map[string]func(f *fixture, t *testing.T){
		"no manifest": func(f *fixture, t *testing.T) {
			if err := f.srv.Delete(bucket, "snapshots/2026-11-20/manifest.json"); err != nil {
				t.Fatal(err)
			}
		},
		"writeComplete false":  func(f *fixture, t *testing.T) { f.put(t, "manifest.json", `{"districts": [], "writeComplete": false}`) },
		"writeComplete absent": func(f *fixture, t *testing.T) { f.put(t, "manifest.json", `{"districts": []}`) },
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, 3)
			setup(f, t)
			_, err := f.store.Load(context.Background(), mustURL(t, "gs://exports/snapshots/2026-11-20/"))
			if !errors.Is(err, model.ErrNotReady) || errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "gs://exports/snapshots/2026-11-20/") {
				t.Errorf("got %v; want ErrNotReady naming the folder", err)
			}
		})
	}
}

// Bad input is ErrInvalid, with a message that names what is wrong.
func TestLoadInvalid(t *testing.T) {
	cases := map[string]struct {
		url     string
		setup   func(f *fixture, t *testing.T)
		want    string
		missing bool // the input itself is missing: a wait may see it arrive
	}{
		"missing bucket":  {url: "gs://nobucket/snapshots/2026-11-20/", want: "bucket nobucket does not exist"},
		"missing folder":  {url: "gs://exports/snapshots/2026-11-19/", want: "does not exist", missing: true},
		"missing object":  {url: "gs://exports/snapshots/2026-11-19.json", want: "input gs://exports/snapshots/2026-11-19.json does not exist", missing: true},
		"no snapshot":     {url: "gs://exports/snapshots/", want: "holds no snapshot"},
		"listed, missing": {url: "gs://exports/snapshots/2026-11-20/", setup: deleteFirstDistrict, want: "does not exist"},
		"truncated": {url: "gs://exports/snapshots/2026-11-20/", setup: func(f *fixture, t *testing.T) {
			f.put(t, "metadata.json", `{"snapshotId": "2026-11-20", "createdAt"`)
		}, want: "metadata.json"},
		"not JSON": {url: "gs://exports/snapshots/2026-11-20/", setup: func(f *fixture, t *testing.T) {
			f.put(t, "district_"+firstDistrict(f, t)+".json", "<html>quota exceeded</html>")
		}, want: "district_"},
		"truncated object": {url: "gs://exports/snapshots/2026-11-22.json", setup: func(f *fixture, t *testing.T) {
			f.srv.Put(bucket, "snapshots/2026-11-22.json", []byte(`{"snapshot_id": "x", "payload": {"districts": [`))
		}, want: "snapshots/2026-11-22.json"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, 3)
			if c.setup != nil {
				c.setup(f, t)
			}
			_, err := f.store.Load(context.Background(), mustURL(t, c.url))
			if !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v; want ErrInvalid saying %q", err, c.want)
			}
			if strings.Contains(err.Error(), "file does not exist") {
				t.Errorf("%v: says what Go's fs.ErrNotExist says, after saying it better", err)
			}
			if errors.Is(err, model.ErrMissing) != c.missing {
				t.Errorf("errors.Is(err, model.ErrMissing) = %v, want %v", !c.missing, c.missing)
			}
		})
	}
}

func firstDistrict(f *fixture, t *testing.T) string {
	t.Helper()
	snap, err := model.LoadDir(f.local)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	return snap.Payload.Districts[0].DistrictID
}

func deleteFirstDistrict(f *fixture, t *testing.T) {
	if err := f.srv.Delete(bucket, "snapshots/2026-11-20/district_"+firstDistrict(f, t)+".json"); err != nil {
		t.Fatal(err)
	}
}

// An object replaced after the folder was listed is gone at the listed
// generation: the read fails naming it, not ready, rather than mix two
// uploads.
func TestReplacedMidRead(t *testing.T) {
	f := newFixture(t, 5)
	id := firstDistrict(f, t)
	gcs.SetAfterList(f.store, func() { f.put(t, "district_"+id+".json", `{"districtId": "`+id+`"}`) })
	_, err := f.store.Load(context.Background(), mustURL(t, "gs://exports/snapshots/2026-11-20/"))
	if !errors.Is(err, model.ErrNotReady) || !strings.Contains(err.Error(), "gs://exports/snapshots/2026-11-20/district_"+id+".json") ||
		!strings.Contains(err.Error(), "replaced or deleted") {
		t.Errorf("got %v; want not ready, naming the replaced object", err)
	}
}

// Cloud Storage that is not there, or goes away mid-read, fails the read
// within the store's bound, naming the endpoint.
func TestUnreachable(t *testing.T) {
	for _, when := range []string{"from the start", "mid-read"} {
		t.Run(when, func(t *testing.T) {
			f := newFixture(t, 40)
			if when == "from the start" {
				f.srv.Stop()
			} else {
				gcs.SetAfterList(f.store, f.srv.Stop)
			}
			t0 := time.Now()
			_, err := f.store.Load(context.Background(), mustURL(t, "gs://exports/snapshots/2026-11-20/"))
			var ue *storeerr.UnreachableError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), "Cloud Storage emulator at 127.0.0.1:") {
				t.Fatalf("got %v; want an UnreachableError naming the endpoint", err)
			}
			// 2 s of silence per request; a request or two may be under way.
			if d := time.Since(t0); d > 15*time.Second {
				t.Errorf("took %s", d)
			}
			if errors.Is(err, model.ErrInvalid) || errors.Is(err, model.ErrNotReady) {
				t.Errorf("%v: an unreachable store is neither bad input nor an upload in progress", err)
			}
		})
	}
}

func TestSpoolLeavesNothing(t *testing.T) {
	f := newFixture(t, 5)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	snap, err := f.store.Load(context.Background(), mustURL(t, "gs://exports/snapshots/2026-11-20/"))
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("the spool left %d files in TMPDIR while open", len(ents))
	}
}
