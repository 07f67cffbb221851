package input

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/model"
)

// minimal is a small valid snapshot of 2026-11-20.
const minimal = `{"snapshot_id":"1","created_at":"c","schema_version":"1","calculation_version":"2","status":"success","errors":[],
 "payload":{"districts":[{"districtId":"42","asOfDate":"2026-11-20","n":3,"f":3.0}],
  "metadata":{"source":"s","fetchedAt":"t","dataAsOfDate":"2026-11-20","districtCount":1,"processingDurationMs":5}}}`

func write(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func generated(t *testing.T, date string) string {
	t.Helper()
	b, err := json.Marshal(model.Generate(date, 3, 1))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A file, stdin and a snapshot directory read the same way; a missing or
// malformed file is invalid input named by its path.
func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := write(t, filepath.Join(dir, "snap.json"), minimal)
	want, err := model.Decode(strings.NewReader(minimal))
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []struct{ path, stdin string }{{file, ""}, {"-", minimal}} {
		got, err := Load(src.path, strings.NewReader(src.stdin))
		if err != nil || !model.Equal(got, want) {
			t.Errorf("Load(%s): %v %s", src.path, err, model.Diff(got, want))
		}
	}
	_, err = Load(filepath.Join(dir, "nope.json"), nil)
	if !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "input "+filepath.Join(dir, "nope.json")+" does not exist") {
		t.Errorf("missing file: %v", err)
	}
	bad := write(t, filepath.Join(dir, "bad.json"), "{")
	if _, err := Load(bad, nil); !errors.Is(err, model.ErrInvalid) || !strings.HasPrefix(err.Error(), bad+": ") {
		t.Errorf("bad file: %v", err)
	}
	if _, err := Load("-", strings.NewReader("{")); !errors.Is(err, model.ErrInvalid) || !strings.HasPrefix(err.Error(), "stdin: ") {
		t.Errorf("bad stdin: %v", err)
	}
	// A byte-order mark is refused from stdin and from a file alike.
	const bom = "\xEF\xBB\xBF"
	bomFile := write(t, filepath.Join(dir, "bom.json"), bom+minimal)
	for _, path := range []string{"-", bomFile} {
		_, err := Load(path, strings.NewReader(bom+minimal))
		if !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "file starts with a byte-order mark") {
			t.Errorf("Load(%s) with a BOM: %v", path, err)
		}
	}
	// A directory is a per-district snapshot directory.
	sub := filepath.Join(dir, "2026-11-20")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(sub, "metadata.json"), `{"snapshotId":"s","dataAsOfDate":"2026-11-20","status":"success"}`)
	write(t, filepath.Join(sub, "district_7.json"), `{"districtId":"7","asOfDate":"2026-11-20"}`)
	s, err := Load(sub, nil)
	if err != nil || len(s.Payload.Districts) != 1 || s.Payload.Districts[0].DistrictID != "7" {
		t.Errorf("Load(dir): %+v, %v", s, err)
	}
}

func TestID(t *testing.T) {
	t.Parallel()
	s := &model.Snapshot{Payload: model.Payload{Metadata: model.PayloadMetadata{DataAsOfDate: "2026-11-20"}}}
	if got := ID(s, ""); got != "2026-11-20" {
		t.Errorf("ID without a date = %q", got)
	}
	if got := ID(s, "2026-11-21"); got != "2026-11-21" {
		t.Errorf("ID with a date = %q", got)
	}
}

// A dated input must be that date's and valid; either failure is invalid
// input naming where it came from.
func TestLoadDated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := write(t, filepath.Join(dir, "2026-11-20.json"), generated(t, "2026-11-20"))
	if s, err := LoadDated(good, "2026-11-20"); err != nil || s.Payload.Metadata.DataAsOfDate != "2026-11-20" {
		t.Errorf("LoadDated(good): %v", err)
	}
	misnamed := write(t, filepath.Join(dir, "2026-11-21.json"), generated(t, "2026-11-20"))
	_, err := LoadDated(misnamed, "2026-11-21")
	if want := misnamed + ": payload.metadata.dataAsOfDate is 2026-11-20, the name says 2026-11-21"; !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("misnamed: %v, want %q", err, want)
	}
	// Without a dataAsOfDate of its own the input takes the date, and is
	// validated under it.
	undated := write(t, filepath.Join(dir, "undated.json"), strings.Replace(minimal, `"dataAsOfDate":"2026-11-20",`, "", 1))
	if _, err := LoadDated(undated, "2026-11-20"); err != nil {
		t.Errorf("undated: %v", err)
	}
	invalid := write(t, filepath.Join(dir, "invalid.json"), strings.Replace(minimal, `"districtId":"42"`, `"districtId":"4 2"`, 1))
	if _, err := LoadDated(invalid, "2026-11-20"); !errors.Is(err, model.ErrInvalid) || !strings.HasPrefix(err.Error(), invalid+": ") ||
		!strings.Contains(err.Error(), "districtId") {
		t.Errorf("invalid: %v", err)
	}
	if _, err := LoadDated(filepath.Join(dir, "nope.json"), "2026-11-20"); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("missing: %v", err)
	}
}

// Dated prefers the snapshot directory of a date to its file.
func TestDirSource(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "2026-11-20.json"), generated(t, "2026-11-20"))
	src := (&Loader{}).Dated(dir)
	if s, err := src(context.Background(), "2026-11-20"); err != nil || len(s.Payload.Districts) != 3 {
		t.Fatalf("file: %v", err)
	}
	sub := filepath.Join(dir, "2026-11-21")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "2026-11-21.json"), generated(t, "2026-11-21"))
	write(t, filepath.Join(sub, "metadata.json"), `{"snapshotId":"s","dataAsOfDate":"2026-11-21","status":"success"}`)
	write(t, filepath.Join(sub, "district_7.json"), `{"districtId":"7","asOfDate":"2026-11-21"}`)
	if s, err := src(context.Background(), "2026-11-21"); err != nil || len(s.Payload.Districts) != 1 {
		t.Errorf("directory: %+v, %v", s, err)
	}
	if _, err := src(context.Background(), "2026-11-22"); !errors.Is(err, model.ErrInvalid) || !errors.Is(err, model.ErrMissing) ||
		!strings.Contains(err.Error(), "neither "+filepath.Join(dir, "2026-11-22")+"/ nor "+filepath.Join(dir, "2026-11-22.json")+" exists") {
		t.Errorf("missing date: %v", err)
	}
}

// URL fetches the date's input; no error names the URL's query, user info
// or fragment.
func TestURLSource(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("token") != "s3cret" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		if r.Header.Get("Accept") != "application/json" {
			http.Error(w, "want JSON", http.StatusNotAcceptable)
			return
		}
		switch date := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/snap/"), ".json"); date {
		case "2026-11-22":
			_, _ = io.WriteString(w, generated(t, "2026-11-21")) // dated otherwise
		case "2026-11-23":
			_, _ = io.WriteString(w, "{")
		default:
			_, _ = io.WriteString(w, generated(t, date))
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	src := URL(srv.URL+"/snap/{date}.json?token=s3cret#frag", srv.Client())
	if s, err := src(ctx, "2026-11-20"); err != nil || s.Payload.Metadata.DataAsOfDate != "2026-11-20" {
		t.Fatalf("fetch: %v", err)
	}
	for date, want := range map[string]string{
		"2026-11-22": srv.URL + "/snap/2026-11-22.json: payload.metadata.dataAsOfDate is 2026-11-21, the name says 2026-11-22",
		"2026-11-23": "input " + srv.URL + "/snap/2026-11-23.json: ",
	} {
		_, err := src(ctx, date)
		if !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v, want %q", date, err, want)
		}
	}
	for name, u := range map[string]string{
		"forbidden":   "http://user:pw@" + strings.TrimPrefix(srv.URL, "http://") + "/snap/{date}.json?token=wrong",
		"unreachable": "http://127.0.0.1:1/snap/{date}.json?token=s3cret",
	} {
		_, err := URL(u, srv.Client())(ctx, "2026-11-20")
		if err == nil || errors.Is(err, model.ErrInvalid) || strings.Contains(err.Error(), "token") || strings.Contains(err.Error(), "pw") ||
			!strings.Contains(err.Error(), "fetching input http://") {
			t.Errorf("%s: %v", name, err)
		}
		if name == "forbidden" && !strings.Contains(err.Error(), "HTTP 403 Forbidden") {
			t.Errorf("forbidden: %v", err)
		}
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://u:p@example.com/a/{date}.json?token=x#f": "https://example.com/a/%7Bdate%7D.json",
		"https://example.com/a/2026-11-20.json":           "https://example.com/a/2026-11-20.json",
		"http://[::1":                                     "(unparsable URL)",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
