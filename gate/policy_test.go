package gate

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/model"
)

func TestDefaultPolicyParses(t *testing.T) {
	if _, err := ParsePolicy(defaultPolicyJSON); err != nil {
		t.Fatalf("embedded default-policy.json: %v", err)
	}
}

// leaves calls f with the object keys of every leaf of v (array steps left
// out, as Policy.Class takes them).
func leaves(keys []string, v any, f func([]string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			leaves(append(keys[:len(keys):len(keys)], k), e, f)
		}
	case []any:
		if len(x) == 0 {
			f(keys)
		}
		for _, e := range x {
			leaves(keys, e, f)
		}
	default:
		f(keys)
	}
}

func TestDefaultPolicyClassifiesGenerated(t *testing.T) {
	p := DefaultPolicy()
	s := model.Generate("2026-11-30", 132, 1)
	missing := map[string]bool{}
	check := func(keys []string) {
		if p.Class(keys) == Unclassified {
			missing[strings.Join(keys, "/")] = true
		}
	}
	for _, d := range s.Payload.Districts {
		data, err := d.Data()
		if err != nil {
			t.Fatal(err)
		}
		leaves([]string{rootData}, data, check)
	}
	rows, _ := s.Rankings["rankings"].([]any)
	if len(rows) == 0 {
		t.Fatal("no rankings rows generated")
	}
	for _, r := range rows {
		leaves([]string{rootRankings}, r, check)
	}
	for k := range missing {
		t.Errorf("unclassified: %s", k)
	}
}

func TestPolicyClass(t *testing.T) {
	p := DefaultPolicy()
	custom, err := ParsePolicy([]byte(`{"version":1,"classes":{
		"counter":["total","data/*/x"],
		"identity":["data/clubs/total","data/*/y"],
		"derived":["data/membership/y"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    *Policy
		keys string
		want Class
	}{
		{p, "data/membership/total", Counter},
		{p, "rankings/paidClubs", Counter},
		{p, "rankings/paidClubBase", Identity},
		{p, "data/clubPerformance/Mem. Base", Identity},
		{p, "data/clubPerformance/Active Members", Counter},
		{p, "data/clubPerformance/% Club Growth", Derived},
		{p, "data/goals/clubsGoal", Identity},
		{p, "data/ranking/clubsRank", Derived},
		// The outermost match decides: topClubs is derived whole, though its
		// elements hold clubId (identity) and memberCount (counter).
		{p, "data/education/topClubs/clubId", Derived},
		{p, "data/education/topClubs/memberCount", Derived},
		{p, "data/membership/byClub/memberCount", Counter},
		{p, "data/somethingNew", Unclassified},
		{p, "data/metadata/calculatedAt", Volatile},
		{p, "data/clubPlan/CSP", Plan},
		// At one depth an anchored path beats a bare name.
		{custom, "data/clubs/total", Identity},
		{custom, "data/membership/total", Counter},
		// Of two paths, the one with fewer wildcards.
		{custom, "data/membership/y", Derived},
		{custom, "data/clubs/y", Identity},
		{custom, "data/clubs/x", Counter},
		{custom, "data/clubs/x/deeper", Counter},
		{custom, "rankings/x", Unclassified},
	} {
		if got := tc.p.Class(strings.Split(tc.keys, "/")); got != tc.want {
			t.Errorf("Class(%s) = %s, want %s", tc.keys, got, tc.want)
		}
	}
}

func TestParsePolicyErrors(t *testing.T) {
	for _, tc := range []struct{ name, json, want string }{
		{"unknown class", `{"version":1,"classes":{"countr":["x"]}}`, `unknown class "countr"`},
		{"unclassified is no class to name", `{"version":1,"classes":{"unclassified":["x"]}}`, `unknown class "unclassified"`},
		{"unknown key", `{"version":1,"clases":{}}`, `unknown key "clases"`},
		{"key in another case", `{"Version":1}`, `unknown key "Version"`},
		{"class given twice", `{"version":1,"classes":{"counter":["a"],"identity":["b"],"counter":["c"]}}`, `key "counter" given twice`},
		{"nested keys are the decoder's", `{"version":1,"arrayKeys":[["a"]],"classes":{"counter":["a"]},"x":{"y":1}}`, `unknown key "x"`},
		{"duplicate across classes", `{"version":1,"classes":{"counter":["total"],"identity":["total"]}}`, `pattern "total" is in two classes, counter and identity`},
		{"duplicate in one class", `{"version":1,"classes":{"counter":["total","total"]}}`, `pattern "total" is listed twice in class counter`},
		{"empty pattern", `{"version":1,"classes":{"counter":[""]}}`, "empty pattern"},
		{"empty path name", `{"version":1,"classes":{"counter":["data//total"]}}`, `pattern "data//total" has an empty name`},
		{"empty array key", `{"version":1,"arrayKeys":[[]]}`, "arrayKeys[0] is empty"},
		{"version", `{"version":2}`, "version 2, want 1"},
		{"no version", `{}`, "version 0, want 1"},
		{"trailing data", `{"version":1} {}`, "data after the policy object"},
		{"not JSON", `{"version":1,`, "unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePolicy([]byte(tc.json))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrPolicy) {
				t.Errorf("%v does not wrap ErrPolicy", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestPolicyMarshalRoundTrip(t *testing.T) {
	b, err := DefaultPolicy().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePolicy(b)
	if err != nil {
		t.Fatalf("reading back %s: %v", b, err)
	}
	b2, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, b2) {
		t.Errorf("not stable:\n%s\n%s", b, b2)
	}
	for _, want := range []string{`"version": 1`, `"Mem. Base"`, `"data/education/topClubs"`, `"arrayKeys"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("file form lacks %s", want)
		}
	}
	if !bytes.Contains(b, []byte("\n  \"classes\": {\n    \"volatile\"")) {
		t.Errorf("classes not indented in order:\n%s", b)
	}
}

func TestParsePolicyAcceptsRepeatsAcrossObjects(t *testing.T) {
	// The same key in two different objects, and the same string as a key
	// and a value, are no duplicates.
	p, err := ParsePolicy([]byte(`{"version":1,"arrayKeys":[["counter"],["counter","x"]],"classes":{"counter":["counter","classes"],"identity":["version"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Class([]string{"data", "counter"}); got != Counter {
		t.Errorf("Class = %s", got)
	}
}
