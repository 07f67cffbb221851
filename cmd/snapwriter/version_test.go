package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/internal/buildinfo"
)

// A binary built without VCS information (as `gcloud builds submit`
// builds it: no .git) reports the revision and version the linker set, as
// the Makefile and the Dockerfile pass them.
func TestVersionLinkedRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary with -ldflags: skipped in -short mode")
	}
	t.Parallel()
	const pkg = "github.com/snapwriter/snapwriter/internal/buildinfo"
	const rev = "0123456789abcdef0123456789abcdef01234567"
	bin := filepath.Join(t.TempDir(), "snapwriter")
	build := exec.Command("go", "build", "-buildvcs=false", "-trimpath",
		"-ldflags", "-s -w -X "+pkg+".revision="+rev+" -X "+pkg+".version=v1.4.0", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "snapwriter v1.4.0 0123456789ab " + runtime.Version() + "\n"; string(out) != want {
		t.Errorf("version printed %q; want %q", out, want)
	}
	if out, err := exec.Command(bin, "--version").Output(); err != nil || !strings.Contains(string(out), "v1.4.0 0123456789ab") {
		t.Errorf("--version printed %q (%v); want the linked version and revision", out, err)
	}
	// --json: the full linked revision, and no modified flag, which a
	// linked revision says nothing of.
	out, err = exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("version --json printed %q: %v", out, err)
	}
	want := map[string]any{"version": "v1.4.0", "revision": rev, "goVersion": runtime.Version(), "os": runtime.GOOS, "arch": runtime.GOARCH}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("version --json = %v; want %v", got, want)
	}
}

// version --json prints what version prints, as one JSON object with the
// platform added; it needs no Firestore, so it runs in -short mode too.
func TestVersionJSON(t *testing.T) {
	t.Parallel()
	run := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		a := newApp(strings.NewReader(""), &out, &errb, func(string) (string, bool) { return "", false })
		if code := a.run(context.Background(), args); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	text := run("version")
	var info buildinfo.Info
	if err := json.Unmarshal([]byte(run("version", "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if want := buildinfo.Read(); !reflect.DeepEqual(info, want) {
		t.Errorf("version --json = %+v; want %+v", info, want)
	}
	if info.OS != runtime.GOOS || info.Arch != runtime.GOARCH || info.GoVersion != runtime.Version() {
		t.Errorf("version --json platform %s/%s %s; want %s/%s %s", info.OS, info.Arch, info.GoVersion, runtime.GOOS, runtime.GOARCH, runtime.Version())
	}
	if !strings.HasPrefix(text, "snapwriter "+info.Version+" ") || !strings.HasSuffix(text, " "+info.GoVersion+"\n") {
		t.Errorf("version printed %q; --json says version %q, Go %q", text, info.Version, info.GoVersion)
	}
}
