package gate

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/model"
)

// clone deep-copies a canonical value, so a test may change one side.
func clone(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = clone(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = clone(e)
		}
		return l
	}
	return v
}

// generatedRow is district 7 of a generated snapshot, with its rankings row.
func generatedRow(t *testing.T) Row {
	t.Helper()
	s := model.Generate("2026-11-30", 10, 1)
	data, err := s.Payload.Districts[6].Data()
	if err != nil {
		t.Fatal(err)
	}
	rank := s.Rankings["rankings"].([]any)[6].(map[string]any)
	return Row{Data: clone(data).(map[string]any), Ranking: clone(rank).(map[string]any)}
}

func cloneRow(r Row) Row {
	out := Row{Data: clone(r.Data).(map[string]any)}
	if r.Ranking != nil {
		out.Ranking = clone(r.Ranking).(map[string]any)
	}
	return out
}

func fields(cs []Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Field
	}
	return out
}

func TestCompareSameRow(t *testing.T) {
	r := generatedRow(t)
	if cs := Compare(DefaultPolicy(), r, cloneRow(r)); len(cs) != 0 {
		t.Errorf("equal rows differ: %v", fields(cs))
	}
}

func TestCompareIgnoresOrder(t *testing.T) {
	r := generatedRow(t)
	n := cloneRow(r)
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, path := range [][]string{{"clubPerformance"}, {"divisionPerformance"}, {"membership", "byClub"}, {"education", "byType"}} {
		var list []any
		if len(path) == 1 {
			list = n.Data[path[0]].([]any)
		} else {
			list = n.Data[path[0]].(map[string]any)[path[1]].([]any)
		}
		rnd.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
	}
	if cs := Compare(DefaultPolicy(), r, n); len(cs) != 0 {
		t.Errorf("shuffled arrays differ: %v", fields(cs))
	}
}

func TestCompareChangedClubRow(t *testing.T) {
	p := DefaultPolicy()
	row := func(active any) Row {
		return Row{Data: model.Object{"clubPerformance": []any{
			model.Object{"Club Number": "00001234", "Active Members": active, "Mem. Base": int64(20)},
			model.Object{"Club Number": "00005678", "Active Members": int64(9), "Mem. Base": int64(9)},
		}}}
	}
	cs := Compare(p, row(int64(21)), row(int64(25)))
	want := []Change{{
		Field: `data.clubPerformance[00001234]["Active Members"]`,
		Keys:  []string{"data", "clubPerformance", "Active Members"},
		Class: Counter, Kind: Changed, Old: int64(21), New: int64(25),
	}}
	if !reflect.DeepEqual(cs, want) {
		t.Errorf("got %+v\nwant %+v", cs, want)
	}
	// An integer equals the double of its value: a re-derivation may change the type.
	if cs := Compare(p, row(int64(3)), row(float64(3))); len(cs) != 0 {
		t.Errorf("int64 3 vs float64 3: %+v", cs)
	}
	if cs := Compare(p, row(float64(3)), row(float64(3.5))); len(cs) != 1 {
		t.Errorf("3.0 vs 3.5: %+v", cs)
	}
	// A type change is a change.
	if cs := Compare(p, row(int64(3)), row("3")); len(cs) != 1 || cs[0].Kind != Changed {
		t.Errorf("3 vs \"3\": %+v", cs)
	}
}

func TestCompareKinds(t *testing.T) {
	p := DefaultPolicy()
	old := Row{
		Data: model.Object{
			"districtId": "7",
			"membership": model.Object{"total": int64(100), "changePercent": 1.5, "gone": "x"},
			"metadata":   model.Object{"calculatedAt": "2026-12-01T00:00:00Z", "fromCache": false},
			"clubPerformance": []any{
				model.Object{"Club Number": "1", "Active Members": int64(3)},
				model.Object{"Club Number": "2", "Active Members": int64(4)},
			},
			"tags":   []any{"b", "a", int64(1)},
			"byHash": []any{model.Object{"a": int64(1)}, model.Object{"a": int64(2)}},
		},
		Ranking: model.Object{"districtId": "7", "paidClubs": int64(50)},
	}
	n := Row{
		Data: model.Object{
			"districtId": "7",
			"membership": model.Object{"total": int64(103), "changePercent": 1.5, "new field": nil},
			"metadata":   model.Object{"calculatedAt": "2026-12-02T00:00:00Z", "fromCache": true, "csvFetchedAt": "x"},
			"clubPerformance": []any{
				model.Object{"Club Number": "3", "Active Members": int64(5)},
				model.Object{"Club Number": "1", "Active Members": int64(3)},
			},
			"tags":   []any{int64(1), "a", "b"},
			"byHash": []any{model.Object{"a": float64(2)}, model.Object{"a": int64(3)}},
		},
	}
	cs := Compare(p, old, n)
	got := make([]string, len(cs))
	for i, c := range cs {
		got[i] = string(c.Kind) + " " + c.Field + " " + string(c.Class)
	}
	fp1 := fingerprint(model.Object{"a": int64(1)})[:8]
	fp3 := fingerprint(model.Object{"a": int64(3)})[:8]
	want := []string{
		"added data.byHash[#" + fp3 + "] unclassified",
		"removed data.byHash[#" + fp1 + "] unclassified",
		"removed data.clubPerformance[2] unclassified",
		"added data.clubPerformance[3] unclassified",
		`added data.membership["new field"] unclassified`,
		"removed data.membership.gone unclassified",
		"changed data.membership.total counter",
		"removed rankings unclassified",
	}
	slices.Sort(want)
	// Compare sorts by field; the two byHash fingerprints sort as they come.
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	for _, c := range cs {
		switch c.Kind {
		case Added:
			if c.Old != nil || (c.New == nil && c.Field != `data.membership["new field"]`) {
				t.Errorf("%s: added with old %v new %v", c.Field, c.Old, c.New)
			}
		case Removed:
			if c.New != nil || c.Old == nil {
				t.Errorf("%s: removed with old %v new %v", c.Field, c.Old, c.New)
			}
		}
	}
	if !slices.IsSortedFunc(cs, func(a, b Change) int { return strings.Compare(a.Field, b.Field) }) {
		t.Errorf("not sorted by field: %v", fields(cs))
	}
}

func TestCompareScalarArrayChanged(t *testing.T) {
	old := Row{Data: model.Object{"tags": []any{"a", "b"}}}
	n := Row{Data: model.Object{"tags": []any{"a", "c"}}}
	cs := Compare(DefaultPolicy(), old, n)
	if len(cs) != 1 || cs[0].Field != "data.tags" || cs[0].Kind != Changed {
		t.Fatalf("got %+v", cs)
	}
}

func TestCompareRankingsAppear(t *testing.T) {
	r := Row{Data: model.Object{}, Ranking: model.Object{"paidClubs": int64(1)}}
	cs := Compare(DefaultPolicy(), Row{Data: model.Object{}}, r)
	if len(cs) != 1 || cs[0].Field != "rankings" || cs[0].Kind != Added {
		t.Fatalf("got %+v", cs)
	}
}

func TestCompareVolatileNeverListed(t *testing.T) {
	old := Row{Data: model.Object{"calculatedAt": "a"}, Ranking: model.Object{"rankingVersion": "1"}}
	n := Row{Data: model.Object{"fromCache": true}, Ranking: model.Object{"rankingVersion": "2"}}
	if cs := Compare(DefaultPolicy(), old, n); len(cs) != 0 {
		t.Errorf("volatile fields listed: %+v", cs)
	}
}

func TestRenderKey(t *testing.T) {
	for k, want := range map[string]string{
		"total": ".total", "_a1": "._a1", "Mem. Base": `["Mem. Base"]`, "1a": `["1a"]`, "": `[""]`,
		`say "hi"`: `["say \"hi\""]`, "é": `["é"]`,
	} {
		if got := renderKey(k); got != want {
			t.Errorf("renderKey(%q) = %s, want %s", k, got, want)
		}
	}
}

func TestCompareNilPolicy(t *testing.T) {
	old := Row{Data: model.Object{"membership": model.Object{"total": int64(1)}}}
	n := Row{Data: model.Object{"membership": model.Object{"total": int64(2)}}}
	cs := Compare(nil, old, n)
	if len(cs) != 1 || cs[0].Class != Counter {
		t.Errorf("nil policy: %+v", cs)
	}
}
