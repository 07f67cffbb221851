package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/model"
)

func club(number string, active int64) model.Object {
	return model.Object{"Club Number": number, "Active Members": active, "Club Name": "Club " + number}
}

func district(id string, total int64, clubs ...model.Object) *Row {
	rows := make([]any, len(clubs))
	for i, c := range clubs {
		rows[i] = c
	}
	return &Row{
		Data:    model.Object{"districtId": id, "membership": model.Object{"total": total}, "clubPerformance": rows},
		Ranking: model.Object{"districtId": id, "paidClubs": int64(40), "clubsRank": int64(3)},
	}
}

func TestCheckRules(t *testing.T) {
	type step func(c *Check)
	same := func(id string) step {
		return func(c *Check) { c.District(id, district(id, 100), district(id, 100)) }
	}
	for _, tc := range []struct {
		name        string
		o           Options
		steps       []step
		held        bool
		rules       []Rule
		byClosing   bool
		holdDistr   []string
		holdFields  []string
		added       []string
		removed     []string
		changed     []string
		unchanged   int
		allowedSize int
	}{
		{name: "unchanged passes", steps: []step{same("1"), same("2")}, unchanged: 2},
		{name: "removed district holds",
			steps: []step{same("1"), func(c *Check) { c.District("2", district("2", 100), nil) }},
			held:  true, rules: []Rule{RuleRemoved}, holdDistr: []string{"2"}, removed: []string{"2"}, unchanged: 1},
		{name: "removed district holds even with AllowValueChanges", o: Options{AllowValueChanges: true},
			steps: []step{func(c *Check) { c.District("2", district("2", 100), nil) }},
			held:  true, rules: []Rule{RuleRemoved}, holdDistr: []string{"2"}, removed: []string{"2"}},
		{name: "added district passes",
			steps: []step{func(c *Check) { c.District("3", nil, district("3", 1)) }},
			added: []string{"3"}},
		{name: "value change holds",
			steps: []step{func(c *Check) { c.District("7", district("7", 100), district("7", 101)) }},
			held:  true, rules: []Rule{RuleValue}, holdDistr: []string{"7"}, holdFields: []string{"data.membership.total"}, changed: []string{"7"}},
		{name: "value change passes with AllowValueChanges", o: Options{AllowValueChanges: true},
			steps:   []step{func(c *Check) { c.District("7", district("7", 100), district("7", 101)) }},
			changed: []string{"7"}},
		{name: "closing allows a counter within its bound", o: Options{Closing: true},
			steps: []step{func(c *Check) {
				c.District("7", district("7", 100, club("00001234", 20)), district("7", 150, club("00001234", 21)))
			}},
			changed: []string{"7"}, byClosing: true, allowedSize: 2},
		{name: "closing holds a counter past its bound", o: Options{Closing: true},
			steps: []step{func(c *Check) { c.District("7", district("7", 100), district("7", 151)) }},
			held:  true, rules: []Rule{RuleClosing}, holdDistr: []string{"7"}, holdFields: []string{"data.membership.total"}, changed: []string{"7"}},
		{name: "closing with AllowValueChanges passes, but not by the closing rule", o: Options{Closing: true, AllowValueChanges: true},
			steps:   []step{func(c *Check) { c.District("7", district("7", 100), district("7", 151)) }},
			changed: []string{"7"}},
		{name: "closing ignores derived", o: Options{Closing: true},
			steps: []step{func(c *Check) {
				n := district("7", 100)
				n.Ranking["clubsRank"] = int64(9)
				c.District("7", district("7", 100), n)
			}},
			changed: []string{"7"}, byClosing: true},
		{name: "closing holds a new club row", o: Options{Closing: true},
			steps: []step{func(c *Check) {
				c.District("7", district("7", 100, club("1", 2)), district("7", 100, club("1", 2), club("2", 3)))
			}},
			held: true, rules: []Rule{RuleClosing}, holdDistr: []string{"7"}, holdFields: []string{"data.clubPerformance[2]"}, changed: []string{"7"}},
		{name: "count: fewer districts holds naming the missing",
			steps: []step{func(c *Check) { c.Baseline("2026-11-29", []string{"1", "2", "10", "F"}, []string{"1", "2"}) }},
			held:  true, rules: []Rule{RuleCount}, holdDistr: []string{"10", "F"}, removed: []string{"10", "F"}},
		{name: "count: a swap holds",
			steps: []step{func(c *Check) { c.Baseline("2026-11-29", []string{"1", "2"}, []string{"1", "3"}) }},
			held:  true, rules: []Rule{RuleCount}, holdDistr: []string{"2"}, added: []string{"3"}, removed: []string{"2"}},
		{name: "count: added districts pass",
			steps: []step{func(c *Check) { c.Baseline("2026-11-29", []string{"1", "2"}, []string{"1", "2", "3"}) }},
			added: []string{"3"}},
		{name: "a failed comparison holds",
			steps: []step{func(c *Check) { c.Fail("reading district 9", errors.New("deadline exceeded")) }},
			held:  true, rules: []Rule{RuleCompare}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCheck("2026-11-30", tc.o)
			for _, s := range tc.steps {
				s(c)
			}
			r := c.Report()
			if r.Held != tc.held {
				t.Errorf("held = %v, want %v (%+v)", r.Held, tc.held, r.Holds)
			}
			var rules, distr, flds []string
			for _, h := range r.Holds {
				rules = append(rules, string(h.Rule))
				distr = append(distr, h.Districts...)
				flds = append(flds, h.Fields...)
			}
			if fmt.Sprint(rules) != fmt.Sprint(tc.rules) {
				t.Errorf("rules %v, want %v", rules, tc.rules)
			}
			if !slices.Equal(distr, tc.holdDistr) || !slices.Equal(flds, tc.holdFields) {
				t.Errorf("hold districts %v fields %v, want %v %v", distr, flds, tc.holdDistr, tc.holdFields)
			}
			d := r.Districts
			if !slices.Equal(d.Added, orEmpty(tc.added)) || !slices.Equal(d.Removed, orEmpty(tc.removed)) ||
				!slices.Equal(d.Changed, orEmpty(tc.changed)) || d.Unchanged != tc.unchanged {
				t.Errorf("districts %+v, want added %v removed %v changed %v unchanged %d", d, tc.added, tc.removed, tc.changed, tc.unchanged)
			}
			if r.PassedByClosingRule != tc.byClosing {
				t.Errorf("passedByClosingRule = %v, want %v", r.PassedByClosingRule, tc.byClosing)
			}
			if got := len(r.Allowed()); got != tc.allowedSize {
				t.Errorf("%d allowed deltas, want %d: %+v", got, tc.allowedSize, r.Allowed())
			}
			if r.Changed() != (len(tc.added)+len(tc.removed)+len(tc.changed) > 0) {
				t.Errorf("Changed() = %v", r.Changed())
			}
		})
	}
}

func orEmpty(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func TestReportJSON(t *testing.T) {
	c := NewCheck("2026-11-30", Options{})
	c.Stored("2026-11-30")
	old := &Row{Data: model.Object{"gone": nil, "kept": int64(1)}}
	n := &Row{Data: model.Object{"kept": int64(1), "fresh": nil, "mem": model.Object{"x": float64(2)}}}
	c.District("7", old, n)
	b, err := json.Marshal(c.Report())
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{
		`{"snapshotId":"2026-11-30","held":true,"holds":[{"rule":"value",`,
		`"districts":["7"],"fields":["data.fresh","data.gone","data.mem"]}]`,
		`"closingPeriod":false,"allowValueChanges":false,"passedByClosingRule":false`,
		`"baseline":{"snapshotId":"","districts":0},"compared":"2026-11-30"`,
		`"districts":{"input":1,"added":[],"removed":[],"changed":["7"],"unchanged":0}`,
		// A removed null keeps "old": null and has no "new"; an added null the reverse.
		`{"field":"data.gone","class":"unclassified","kind":"removed","old":null,"verdict":"holds","reason":"field disappeared"}`,
		`{"field":"data.mem","class":"unclassified","kind":"added","new":{"x":2.0},"verdict":"holds","reason":"field appeared"}`,
		`{"field":"data.fresh","class":"unclassified","kind":"added","new":null,"verdict":"holds"`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report JSON lacks %s\n%s", want, s)
		}
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got := back.Changes[0].Changes[1:] // data.gone, data.mem
	if got[0].Old != (Value{nil, true}) || got[0].New.Present {
		t.Errorf("data.gone read back as old %+v new %+v", got[0].Old, got[0].New)
	}
	if want := (Value{model.Object{"x": float64(2)}, true}); !reflect.DeepEqual(got[1].New, want) {
		t.Errorf("data.mem read back as %+v, want %+v", got[1].New, want)
	}
}

func TestReportEmptyJSON(t *testing.T) {
	b, err := json.Marshal(NewCheck("2026-11-30", Options{}).Report())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"snapshotId":"2026-11-30","held":false,"holds":[],"closingPeriod":false,"allowValueChanges":false,` +
		`"passedByClosingRule":false,"baseline":{"snapshotId":"","districts":0},"compared":"",` +
		`"districts":{"input":0,"added":[],"removed":[],"changed":[],"unchanged":0},"changes":[]}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

func TestWriteTextLimits(t *testing.T) {
	c := NewCheck("2026-11-30", Options{})
	var live []string
	for i := 1; i <= 60; i++ {
		live = append(live, fmt.Sprint(i))
	}
	c.Baseline("2026-11-29", live, nil)
	long := strings.Repeat("x", 100)
	c.District("1", &Row{Data: model.Object{"note": "a"}}, &Row{Data: model.Object{"note": long}})
	many := model.Object{}
	for i := range 55 {
		many[fmt.Sprintf("f%02d", i)] = int64(i)
	}
	c.District("2", &Row{Data: model.Object{}}, &Row{Data: many})
	var b strings.Builder
	if err := c.Report().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"- district 50 (removed)\n… and 10 more removed\n",
		`data.note: "a" → "` + strings.Repeat("x", 59) + "…",
		"held: count: 60 districts of the 60 live in the newest complete snapshot 2026-11-29 are missing from the input\n    districts: 1, 2, 3,",
		"50 … and 10 more\n",
		"    data.f49: (absent) → 49  (unclassified; holds: field appeared)\n    … and 5 more fields\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "district 51 (removed)") {
		t.Errorf("more than 50 districts listed:\n%s", out)
	}
}

func TestCompareIDs(t *testing.T) {
	ids := []string{"U", "10", "F", "2", "132", "1", "01"}
	slices.SortFunc(ids, compareIDs)
	if want := []string{"01", "1", "2", "10", "132", "F", "U"}; !slices.Equal(ids, want) {
		t.Errorf("got %v, want %v", ids, want)
	}
}
