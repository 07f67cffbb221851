package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
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
}
