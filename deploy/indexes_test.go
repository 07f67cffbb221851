// Package deploy holds the deployment scripts; its tests run them with
// gcloud replaced, so they check what would be applied, not Google Cloud.
package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/internal/indexcount"
)

const indexConfig = "../firestore.indexes.json"

// indexesScript runs deploy/indexes.sh with args and PATH prefixed with
// path (when not empty), and returns its output.
func indexesScript(t *testing.T, path string, args ...string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("deploy/indexes.sh needs python3")
	}
	cmd := exec.Command("bash", append([]string{"indexes.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "PROJECT_ID=")
	if path != "" {
		cmd.Env = append(cmd.Env, "PATH="+path+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// In print mode the script prints one gcloud command per field override
// and per composite index of firestore.indexes.json: each exemption a
// `fields update … --disable-indexes` in its collection group, the root's
// renamed to --collection.
func TestIndexesScriptPrints(t *testing.T) {
	t.Parallel()
	cfg, err := indexcount.Load(indexConfig)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Exemptions()) == 0 {
		t.Fatal("firestore.indexes.json has no exemptions")
	}
	for _, root := range []string{"snapshots", "other"} {
		out, err := indexesScript(t, "", "--print", "--project", "p1", "--database", "db1", "--collection", root)
		if err != nil {
			t.Fatalf("--collection %s: %v\n%s", root, err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if want := len(cfg.FieldOverrides) + len(cfg.Indexes); len(lines) != want {
			t.Errorf("--collection %s: %d commands, want %d:\n%s", root, len(lines), want, out)
		}
		disabled := 0
		for _, l := range lines {
			if !strings.HasPrefix(l, "gcloud firestore indexes ") || !strings.Contains(l, "--project=p1") || !strings.Contains(l, "--database=db1") {
				t.Errorf("not a gcloud command for p1/db1: %s", l)
			}
			if strings.Contains(l, "--disable-indexes") {
				disabled++
			}
			if root != "snapshots" && strings.Contains(l, "--collection-group=snapshots") {
				t.Errorf("--collection %s: the root's group is not renamed: %s", root, l)
			}
		}
		if disabled != len(cfg.Exemptions()) {
			t.Errorf("--collection %s: %d commands disable indexes, firestore.indexes.json has %d exemptions", root, disabled, len(cfg.Exemptions()))
		}
		for _, o := range cfg.Exemptions() {
			group := o.CollectionGroup
			if group == "snapshots" {
				group = root
			}
			want := "gcloud firestore indexes fields update " + o.FieldPath + " --collection-group=" + group + " --disable-indexes "
			n := 0
			for _, l := range lines {
				if strings.HasPrefix(l, want) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("--collection %s: %d commands %q…, want 1", root, n, want)
			}
		}
		for _, ix := range cfg.Indexes {
			group := ix.CollectionGroup
			if group == "snapshots" {
				group = root
			}
			want := "gcloud firestore indexes composite create --collection-group=" + group + " "
			found := false
			for _, l := range lines {
				found = found || strings.HasPrefix(l, want) && strings.Contains(l, "--field-config=field-path="+ix.Fields[0].FieldPath+",")
			}
			if !found {
				t.Errorf("--collection %s: no command creates the composite index on %s", root, ix.Fields[0].FieldPath)
			}
		}
	}
}

// Run for real, the script calls gcloud with the printed commands, in
// order, and takes a composite index that exists already for done.
func TestIndexesScriptRuns(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	fake := "#!/usr/bin/env bash\necho \"gcloud $*\" >> " + calls + "\n" +
		"case \"$*\" in *'composite create'*) echo 'ERROR: (gcloud.firestore.indexes.composite.create) ALREADY_EXISTS: index already exists' >&2; exit 1;; esac\n"
	if err := os.WriteFile(filepath.Join(bin, "gcloud"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	printed, err := indexesScript(t, "", "--print", "--project", "p1")
	if err != nil {
		t.Fatalf("%v\n%s", err, printed)
	}
	if out, err := indexesScript(t, bin, "--project", "p1"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	// The fake logs its arguments unquoted; the printed form quotes
	// '--database=(default)'.
	if want := strings.ReplaceAll(printed, "'", ""); string(got) != want {
		t.Errorf("gcloud was called with\n%s\nprinted\n%s", got, want)
	}
	if out, err := indexesScript(t, "", "--config", indexConfig); err == nil {
		t.Errorf("ran without a project:\n%s", out)
	}
}
