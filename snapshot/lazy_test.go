package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// inputFile is s written to a file as the command line reads it, and the
// file's size.
func inputFile(tb testing.TB, s *model.Snapshot) (path string, size int) {
	tb.Helper()
	b, err := model.Marshal(s)
	if err != nil {
		tb.Fatal(err)
	}
	path = filepath.Join(tb.TempDir(), "in.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path, len(b)
}

// lazyCopy is s written to a file and read back lazily (model.Open), as
// the command line reads its input.
func lazyCopy(t *testing.T, s *model.Snapshot) *model.Snapshot {
	t.Helper()
	path, _ := inputFile(t, s)
	l, err := model.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// storedDocs is every district document of snapshot id, without the
// writer's fence, as canonical JSON by district id.
func (e *env) storedDocs(id string) map[string]string {
	e.t.Helper()
	docs, err := e.clean.Collection(DefaultCollection).Doc(id).Collection("districts").Documents(context.Background()).GetAll()
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range docs {
		m := d.Data()
		delete(m, "writerFence")
		b, err := model.Marshal(m)
		if err != nil {
			e.t.Fatal(err)
		}
		out[d.Ref.ID] = string(b)
	}
	return out
}

// hashesOf is what a root records of its districts and payload: every
// manifest entry's id, hash and size, and the payload hash.
func hashesOf(root map[string]any) string {
	var out []string
	for _, e := range asMap(root["manifest"])["districts"].([]any) {
		m := asMap(e)
		out = append(out, fmt.Sprint(m["districtId"], m["contentHash"], m["status"], m["fileSize"]))
	}
	sort.Strings(out)
	return asMap(root["metadata"])["payloadHash"].(string) + "\n" + strings.Join(out, "\n")
}

// A snapshot read lazily writes what the same snapshot in memory writes,
// byte for byte: documents, manifest hashes and sizes, payload hash. Each
// district's data is read back once, when its chunk is encoded — none
// before the chunks start, and not again when a chunk's commit is retried.
func TestLazyWriteIsTheInMemoryWrite(t *testing.T) {
	t.Parallel()
	src := gen(180, 9)
	mem, memEnv := src, newEnv(t)
	mustWrite(t, memEnv.writer(), day, mem)

	lazy, e := lazyCopy(t, src), newEnv(t)
	var before atomic.Int64
	before.Store(-1)
	// Fail the first commit of every chunk once: its retry commits the
	// writes encoded for the first attempt.
	var mu sync.Mutex
	failed := map[string]bool{}
	e.f.setRule(func(c *commitCall) error {
		if len(c.districts) == 0 {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if failed[c.districts[0]] {
			return nil
		}
		failed[c.districts[0]] = true
		return status.Error(codes.Aborted, "injected")
	})
	res := mustWrite(t, e.writer(WithConcurrency(4), withBeforeChunks(func(context.Context) { before.Store(lazy.DataLoads()) })), day, lazy)
	checkInvariants(t, res)
	if n := before.Load(); n != 0 {
		t.Errorf("%d districts read back before the chunks started, want none", n)
	}
	// A chunk's documents are read back and encoded once; a retried
	// attempt commits the same encoded writes.
	if n, chunks := lazy.DataLoads(), len(failed); n != int64(len(src.Payload.Districts)) || chunks != res.Chunks {
		t.Errorf("%d district reads for %d districts (%d chunks failed once of %d), want one per district",
			n, len(src.Payload.Districts), chunks, res.Chunks)
	}

	got, want := e.storedDocs(day), memEnv.storedDocs(day)
	if len(got) != len(want) {
		t.Fatalf("%d documents stored, in memory %d", len(got), len(want))
	}
	for id, doc := range want {
		if got[id] != doc {
			t.Errorf("%s differs from the in-memory write's", id)
		}
	}
	if g, w := hashesOf(e.rootData(day)), hashesOf(memEnv.rootData(day)); g != w {
		t.Errorf("root hashes differ:\n%s\nin memory:\n%s", g, w)
	}
	if back := e.get(day); !model.Equal(back, src) {
		t.Errorf("get != input: %s", model.Diff(back, src))
	}
	rep, err := NewReader(e.clean, "").Verify(context.Background(), day, lazy)
	if err != nil || !rep.Intact {
		t.Errorf("verify against the lazy input: %+v, %v", rep, err)
	}
}

// Repair takes a lazily read input like one in memory: it writes only
// what is missing, and the result is the input.
func TestRepairLazyInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := gen(132, 7)
	e.deny(layout.DistrictIDs(src)[60])
	mustPartial(t)(e.writer().Write(context.Background(), day, lazyCopy(t, src)))
	e.f.setRule(nil)

	lazy := lazyCopy(t, src)
	rep, err := e.writer().Repair(context.Background(), day, lazy)
	if err != nil {
		t.Fatalf("Repair: %v", err)
	}
	checkInvariants(t, rep)
	if rep.Outcome != OutcomeComplete || rep.DistrictsWritten != 50 || lazy.DataLoads() != 50 {
		t.Errorf("repair wrote %d districts, read %d back: %+v", rep.DistrictsWritten, lazy.DataLoads(), rep)
	}
	if back := e.get(day); !model.Equal(back, src) {
		t.Errorf("get != input: %s", model.Diff(back, src))
	}
	// An input whose district differs is refused by its hash, unread.
	other := gen(132, 7)
	memData(other.Payload.Districts[3])["membership"].(model.Object)["total"] = int64(-1)
	lo := lazyCopy(t, other)
	if _, err := e.writer().Repair(context.Background(), day, lo); err == nil || !bytes.Contains([]byte(err.Error()), []byte("district "+layout.DistrictIDs(src)[3])) {
		t.Errorf("repair with another district's data: %v", err)
	}
	if n := lo.DataLoads(); n != 0 {
		t.Errorf("a refused repair read %d districts back", n)
	}
}
