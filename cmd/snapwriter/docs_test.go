package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// update rewrites the generated documentation instead of checking it:
// `go test ./cmd/snapwriter -run TestGeneratedDocs -update`, which `make
// docs` runs.
var update = flag.Bool("update", false, "rewrite the generated documentation (docs/cli/, docs/man/, the exit codes in README.md and docs/cli.md)")

// manDate is the date the man pages' header shows: fixed, so that the
// pages are the same on every machine and day (cobra's default is now).
var manDate = time.Date(2026, time.November, 1, 0, 0, 0, 0, time.UTC)

const regenerate = "go test ./cmd/snapwriter -run TestGeneratedDocs -update (or make docs)"

// docsTree is the command tree as the reference documents it: the root
// of an app built without surroundings, with the completion and help
// commands cobra adds when it runs, and no "Auto generated … on DATE"
// line.
func docsTree() *cobra.Command {
	root := newApp(nil, io.Discard, io.Discard, nil).rootCommand()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var disable func(c *cobra.Command)
	disable = func(c *cobra.Command) {
		c.DisableAutoGenTag = true
		for _, sub := range c.Commands() {
			disable(sub)
		}
	}
	disable(root)
	return root
}

// generateDocs writes the Markdown reference (one file a command) into
// md and the man pages into man.
func generateDocs(t *testing.T, md, man string) {
	t.Helper()
	if err := doc.GenMarkdownTree(docsTree(), md); err != nil {
		t.Fatal(err)
	}
	header := &doc.GenManHeader{Title: "SNAPWRITER", Section: "1", Date: &manDate, Source: "snapwriter", Manual: "snapwriter manual"}
	if err := doc.GenManTree(docsTree(), header, man); err != nil {
		t.Fatal(err)
	}
}

// The reference in docs/cli/ and docs/man/ is the command tree's, and the
// exit codes in README.md and docs/cli.md are the table of endings':
// a stale file is named, with the command that writes it again.
func TestGeneratedDocs(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	for _, d := range []string{"cli", "man"} {
		if err := os.MkdirAll(filepath.Join(tmp, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	generateDocs(t, filepath.Join(tmp, "cli"), filepath.Join(tmp, "man"))
	for _, d := range []string{"cli", "man"} {
		syncDir(t, filepath.Join(tmp, d), filepath.Join("..", "..", "docs", d))
	}
	for _, f := range []string{"README.md", filepath.Join("docs", "cli.md")} {
		syncExitCodes(t, filepath.Join("..", "..", f))
	}
}

// syncDir checks (or with -update writes) that dir holds exactly the
// files of want, byte for byte.
func syncDir(t *testing.T, want, dir string) {
	t.Helper()
	got := map[string]bool{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		got[e.Name()] = true
	}
	wants, err := os.ReadDir(want)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range wants {
		delete(got, e.Name())
		b, err := os.ReadFile(filepath.Join(want, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, e.Name())
		old, err := os.ReadFile(path)
		switch {
		case err == nil && bytes.Equal(old, b):
		case *update:
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		case err != nil:
			t.Errorf("%s is missing: run %s", repoPath(path), regenerate)
		default:
			t.Errorf("%s is stale: run %s", repoPath(path), regenerate)
		}
	}
	for name := range got {
		path := filepath.Join(dir, name)
		if *update {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s documents no command: run %s", repoPath(path), regenerate)
	}
}

// syncExitCodes checks (or with -update writes) the exit-code table
// between the markers of the Markdown file path.
func syncExitCodes(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	begin, end := strings.Index(s, exitCodesBegin), strings.Index(s, exitCodesEnd)
	if begin < 0 || end < begin {
		t.Errorf("%s has no %s … %s markers for the exit codes", repoPath(path), exitCodesBegin, exitCodesEnd)
		return
	}
	fresh := s[:begin] + exitCodesBegin + "\n" + exitCodesMarkdown() + s[end:]
	switch {
	case fresh == s:
	case *update:
		if err := os.WriteFile(path, []byte(fresh), 0o644); err != nil {
			t.Fatal(err)
		}
	default:
		t.Errorf("%s: the exit codes are stale: run %s", repoPath(path), regenerate)
	}
}

// repoPath is path, relative to this package, as the repository names it.
func repoPath(path string) string {
	return filepath.ToSlash(strings.TrimPrefix(path, filepath.Join("..", "..")+string(filepath.Separator)))
}
