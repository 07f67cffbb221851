package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func fixed(r Result) func(context.Context, Results) Result {
	return func(context.Context, Results) Result { return r }
}

// A failed check skips the checks that need it, directly or through a
// skipped one, naming the root cause; the others still run, and the
// report is not OK.
func TestRunSkipsDependents(t *testing.T) {
	ran := map[string]bool{}
	mark := func(name string, r Result) func(context.Context, Results) Result {
		return func(context.Context, Results) Result { ran[name] = true; return r }
	}
	rep := Run(context.Background(), []Check{
		{Name: "a", Run: mark("a", Okf("fine"))},
		{Name: "db", Needs: []string{"a"}, Run: mark("db", Problemf("do X", "down"))},
		{Name: "mode", Needs: []string{"db"}, Run: mark("mode", Okf("never"))},
		{Name: "index", Needs: []string{"mode"}, Run: mark("index", Okf("never"))},
		{Name: "other", Needs: []string{"a"}, Run: mark("other", Skippedf("by hand: Y"))},
		{Name: "last", Needs: []string{"other"}, Run: mark("last", Okf("runs"))},
	})
	if rep.OK {
		t.Error("OK with a problem")
	}
	want := []Entry{
		{Name: "a", Status: OK, Detail: "fine"},
		{Name: "db", Status: Problem, Detail: "down", Fix: "do X"},
		{Name: "mode", Status: Skipped, Detail: "because db failed"},
		{Name: "index", Status: Skipped, Detail: "because db failed"},
		{Name: "other", Status: Skipped, Detail: "by hand: Y"},
		{Name: "last", Status: OK, Detail: "runs"},
	}
	if len(rep.Checks) != len(want) {
		t.Fatalf("got %d entries, want %d", len(rep.Checks), len(want))
	}
	for i, w := range want {
		g := rep.Checks[i]
		if g.Name != w.Name || g.Status != w.Status || g.Detail != w.Detail || g.Fix != w.Fix {
			t.Errorf("entry %d = %+v, want %+v", i, g, w)
		}
	}
	if ran["mode"] || ran["index"] {
		t.Error("a check that needs a failed one ran")
	}
	if !ran["last"] {
		t.Error("a check that needs a skipped (not failed) one did not run")
	}
}

// Run passes earlier results to later checks; only a problem keeps its fix.
func TestRunPassesResults(t *testing.T) {
	rep := Run(context.Background(), []Check{
		{Name: "first", Run: fixed(Result{Status: OK, Detail: "x", Fix: "ignored", Data: 42})},
		{Name: "second", Run: func(_ context.Context, r Results) Result {
			return Okf("got %v", r["first"].Data)
		}},
	})
	if !rep.OK || rep.Checks[0].Fix != "" || rep.Checks[1].Detail != "got 42" {
		t.Errorf("report %+v", rep)
	}
}

// The text form: a line per check, the fix under a problem, a summary;
// the JSON form: checks[] of name, status, detail, fix, and ok.
func TestRender(t *testing.T) {
	rep := Run(context.Background(), []Check{
		{Name: "credentials", Run: fixed(Okf("emulator"))},
		{Name: "db", Run: fixed(Problemf("gcloud fix it", "not found"))},
	})
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	wantText := "credentials  ok       emulator\n" +
		"db           problem  not found\n" +
		"             fix:     gcloud fix it\n" +
		"1 problem found\n"
	if text.String() != wantText {
		t.Errorf("text:\n%s\nwant:\n%s", text.String(), wantText)
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["ok"] != false {
		t.Errorf("ok = %v", got["ok"])
	}
	checks, _ := got["checks"].([]any)
	if len(checks) != 2 {
		t.Fatalf("checks = %v", got["checks"])
	}
	for _, c := range checks {
		m := c.(map[string]any)
		for _, k := range []string{"name", "status", "detail", "fix"} {
			if _, ok := m[k]; !ok {
				t.Errorf("check %v has no %q", m, k)
			}
		}
		if len(m) != 4 {
			t.Errorf("check %v: fields beyond name, status, detail, fix", m)
		}
	}
	if !strings.Contains(js.String(), `"fix": "gcloud fix it"`) {
		t.Errorf("json:\n%s", js.String())
	}
}

// A Needs name that is not an earlier check is a bug in the caller.
func TestRunUnknownNeedPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	Run(context.Background(), []Check{{Name: "a", Needs: []string{"b"}, Run: fixed(Okf(""))}})
}
