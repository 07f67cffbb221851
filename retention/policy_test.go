package retention

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/snapshot"
)

// span is a snapshot of state on every date from first to last.
func span(first, last string, state snapshot.State) []snapshot.Summary {
	var out []snapshot.Summary
	to, _ := time.Parse(time.DateOnly, last)
	for d, _ := time.Parse(time.DateOnly, first); !d.After(to); d = d.AddDate(0, 0, 1) {
		out = append(out, snapshot.Summary{SnapshotID: d.Format(time.DateOnly), State: state, Districts: 3})
	}
	return out
}

// at is a snapshot of state on each of dates.
func at(state snapshot.State, dates ...string) []snapshot.Summary {
	var out []snapshot.Summary
	for _, d := range dates {
		out = append(out, snapshot.Summary{SnapshotID: d, State: state, Districts: 3})
	}
	return out
}

// without is list less the snapshots of dates (gaps).
func without(list []snapshot.Summary, dates ...string) []snapshot.Summary {
	return slices.DeleteFunc(list, func(s snapshot.Summary) bool { return slices.Contains(dates, s.SnapshotID) })
}

func join(lists ...[]snapshot.Summary) []snapshot.Summary { return slices.Concat(lists...) }

func days(n int) *int { return &n }

// kept renders a plan's kept verdicts as "DATE reason,reason" lines,
// oldest first.
func kept(p Plan) string {
	var lines []string
	for _, v := range p.Kept() {
		reasons := make([]string, len(v.Reasons))
		for i, r := range v.Reasons {
			reasons[i] = string(r)
		}
		lines = append(lines, v.SnapshotID+" "+strings.Join(reasons, ","))
	}
	return strings.Join(lines, "\n")
}

// today is the date the table's KeepDays count from: 2027-01-10, 19:00 in
// UTC-6, given in UTC, so 2027-01-11 (the zone of the time given decides:
// TestPolicyCutoffAndString).
var today = time.Date(2027, 1, 10, 19, 0, 0, 0, time.FixedZone("UTC-6", -6*3600)).UTC()

func TestSelect(t *testing.T) {
	t.Parallel()
	const (
		complete = snapshot.StateComplete
		partial  = snapshot.StatePartial
	)
	cases := []struct {
		name   string
		policy Policy
		list   []snapshot.Summary
		// want are the kept snapshots and their reasons; every other
		// dated snapshot is pruned.
		want string
	}{{
		name:   "month ends in a leap year: Jan 31, Feb 29, Mar 31, Apr 30",
		policy: Policy{Monthly: 5},
		list:   span("2024-01-20", "2024-05-03", complete),
		want: `2024-01-31 monthly
2024-02-29 monthly
2024-03-31 monthly
2024-04-30 monthly
2024-05-03 newest-complete,monthly`,
	}, {
		name:   "month ends in a common year: Feb 28",
		policy: Policy{Monthly: 2},
		list:   span("2026-02-20", "2026-03-02", complete),
		want: `2026-02-28 monthly
2026-03-02 newest-complete,monthly`,
	}, {
		name:   "year ends; more years asked than there are",
		policy: Policy{Yearly: 10},
		list:   span("2024-12-25", "2026-01-05", complete),
		want: `2024-12-31 yearly
2025-12-31 yearly
2026-01-05 newest-complete,yearly`,
	}, {
		// 2026-12-28 (Mon) to 2027-01-03 (Sun) are ISO week 2026-W53: the
		// weekly rule keeps 2027-01-03 for it, the yearly 2026-12-31.
		name:   "ISO week-year boundary: 2026-12-31 and 2027-01-01 in 2026-W53",
		policy: Policy{Weekly: 3, Yearly: 2},
		list:   span("2026-12-20", "2027-01-05", complete),
		want: `2026-12-27 weekly
2026-12-31 yearly
2027-01-03 weekly
2027-01-05 newest-complete,weekly,yearly`,
	}, {
		// 2024-12-30 (Mon) is in 2025-W01, 2024-12-29 (Sun) in 2024-W52.
		name:   "ISO week-year boundary: 2024-12-30 in 2025-W01",
		policy: Policy{Weekly: 2, Monthly: 2, Yearly: 2},
		list:   span("2024-11-25", "2024-12-30", complete),
		want: `2024-11-30 monthly
2024-12-29 weekly
2024-12-30 newest-complete,weekly,monthly,yearly`,
	}, {
		name:   "ISO week-year boundary with a gap: 2024-12-29 missing",
		policy: Policy{Weekly: 2},
		list:   without(span("2024-12-20", "2024-12-30", complete), "2024-12-29"),
		want: `2024-12-28 weekly
2024-12-30 newest-complete,weekly`,
	}, {
		name:   "gaps: the last N days, weeks and months that have a snapshot",
		policy: Policy{Daily: 3, Weekly: 3, Monthly: 3},
		// January, March and June (no February, April, May); in June
		// 06-01 (W23), 06-10 (W24), 06-11: no W22 nor W23 after 06-01.
		list: at(complete, "2026-01-05", "2026-01-20", "2026-03-03", "2026-06-01", "2026-06-10", "2026-06-11"),
		want: `2026-01-20 monthly
2026-03-03 weekly,monthly
2026-06-01 daily,weekly
2026-06-10 daily
2026-06-11 newest-complete,daily,weekly,monthly`,
	}, {
		name:   "counts above the periods there are: every period kept, nothing more",
		policy: Policy{Daily: 100, Weekly: 100, Monthly: 100, Yearly: 100},
		list:   at(complete, "2026-03-01", "2026-03-02", "2026-03-03"),
		// 2026-03-01 is a Sunday (W09), 03-02 and 03-03 in W10.
		want: `2026-03-01 daily,weekly
2026-03-02 daily
2026-03-03 newest-complete,daily,weekly,monthly,yearly`,
	}, {
		name:   "a month whose newest snapshot is partial: its newest complete one kept",
		policy: Policy{Monthly: 2},
		list: join(span("2026-03-28", "2026-03-30", complete), at(partial, "2026-03-31"),
			at(complete, "2026-04-02")),
		want: `2026-03-30 monthly
2026-04-02 newest-complete,monthly`,
	}, {
		name:   "incomplete snapshots neither count for nor are kept by the period rules",
		policy: Policy{Daily: 2},
		list: join(at(complete, "2026-05-10", "2026-05-12"), at(partial, "2026-05-11"),
			at(snapshot.StateUnsuccessful, "2026-05-09"), at(complete, "2026-05-08")),
		want: `2026-05-10 daily
2026-05-12 newest-complete,daily`,
	}, {
		name:   "incomplete snapshots newer than the newest complete are kept, older ones pruned",
		policy: Policy{Daily: 1},
		list: join(at(complete, "2026-05-08", "2026-05-10"), at(partial, "2026-05-09", "2026-05-11"),
			at(snapshot.StateInterrupted, "2026-05-12"), at(snapshot.StateWriting, "2026-05-13"),
			at(snapshot.StateUnknown, "2026-05-14")),
		want: `2026-05-10 newest-complete,daily
2026-05-11 newer-than-newest-complete
2026-05-12 newer-than-newest-complete
2026-05-13 newer-than-newest-complete
2026-05-14 newer-than-newest-complete`,
	}, {
		name:   "no complete snapshot: every incomplete one kept",
		policy: Policy{Daily: 1, KeepDays: days(0)},
		list:   at(partial, "2026-05-08", "2026-05-09"),
		want: `2026-05-08 newer-than-newest-complete
2026-05-09 newer-than-newest-complete`,
	}, {
		// today is 2027-01-11 in UTC: --keep-days 3 keeps 2027-01-08 on.
		name:   "keep-days combined: union, whatever the state, reasons listed",
		policy: Policy{KeepDays: days(3), Monthly: 2},
		list: join(span("2026-12-29", "2027-01-09", complete), at(partial, "2027-01-10"),
			at(partial, "2027-01-07", "2026-12-25")),
		want: `2026-12-31 monthly
2027-01-08 keep-days
2027-01-09 newest-complete,monthly,keep-days
2027-01-10 keep-days,newer-than-newest-complete`,
	}, {
		name:   "keep-days alone keeps the newest complete however old",
		policy: Policy{KeepDays: days(0)},
		list:   span("2026-01-01", "2026-01-03", complete),
		want:   `2026-01-03 newest-complete`,
	}, {
		// Unlike the cutoff --keep-days was: the partial 2026-01-03 stays.
		name:   "keep-days alone keeps an incomplete snapshot newer than the newest complete",
		policy: Policy{KeepDays: days(30)},
		list:   join(span("2026-01-01", "2026-01-02", complete), at(partial, "2026-01-03"), at(partial, "2025-12-31")),
		want: `2026-01-02 newest-complete
2026-01-03 newer-than-newest-complete`,
	}, {
		name:   "a snapshot left deleting is pruned whatever keeps its date",
		policy: Policy{KeepDays: days(30), Daily: 7},
		list:   join(at(complete, "2027-01-05", "2027-01-07"), at(snapshot.StateDeleting, "2027-01-06", "2027-01-08")),
		want: `2027-01-05 daily,keep-days
2027-01-07 newest-complete,daily,keep-days`,
	}, {
		name:   "roots whose id is not a date are left alone",
		policy: Policy{Daily: 1},
		list:   join(at(complete, "2026-05-01", "2026-05-02", "latest", "2026-13-01")),
		want:   `2026-05-02 newest-complete,daily`,
	}, {
		// The old SelectPrune's table: a plain cutoff, whatever the state,
		// but never the newest complete, and deleting always.
		name:   "before: a plain cutoff",
		policy: Policy{Before: "2026-11-20"},
		list: join(at(partial, "2026-11-22"), at(snapshot.StateDeleting, "2026-11-21"), at(complete, "2026-11-20", "2026-11-19", "x"),
			at(snapshot.StateInterrupted, "2026-11-18")),
		want: `2026-11-20 newest-complete,cutoff
2026-11-22 cutoff`,
	}, {
		name:   "before in the future: all but the newest complete, even newer incomplete ones",
		policy: Policy{Before: "2099-01-01"},
		list:   join(at(complete, "2026-11-19", "2026-11-20"), at(partial, "2026-11-22")),
		want:   `2026-11-20 newest-complete`,
	}, {
		name:   "before in the past: only the deleting one",
		policy: Policy{Before: "2000-01-01"},
		list:   join(at(complete, "2026-11-19", "2026-11-20"), at(snapshot.StateDeleting, "2026-11-21")),
		want: `2026-11-19 cutoff
2026-11-20 newest-complete,cutoff`,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			plan, err := c.policy.Select(c.list, today)
			if err != nil {
				t.Fatal(err)
			}
			if got := kept(plan); got != c.want {
				t.Errorf("%s kept:\n%s\nwant:\n%s", c.policy, got, c.want)
			}
			// Every dated snapshot has its verdict, oldest first; the
			// pruned ones no reason but deleting.
			var dated []string
			for _, s := range c.list {
				if len(s.SnapshotID) == 10 && s.SnapshotID != "2026-13-01" {
					dated = append(dated, s.SnapshotID)
				}
			}
			slices.Sort(dated)
			var ids []string
			for _, v := range plan.Verdicts {
				ids = append(ids, v.SnapshotID)
				if !v.Keep && len(v.Reasons) != 0 && (v.State != snapshot.StateDeleting || v.Reasons[0] != ReasonDeleting) {
					t.Errorf("%s pruned with reasons %v", v.SnapshotID, v.Reasons)
				}
				if v.Reasons == nil {
					t.Errorf("%s: nil reasons", v.SnapshotID)
				}
			}
			if !slices.Equal(ids, dated) {
				t.Errorf("verdicts for %v, want %v", ids, dated)
			}
		})
	}
}

// restic's documented examples (doc/060_forget.rst).
func TestSelectResticExamples(t *testing.T) {
	t.Parallel()
	// "Suppose you have only made one backup every Sunday for 12 weeks":
	// --keep-daily 4 keeps the last four.
	var sundays []snapshot.Summary
	for _, d := range []string{"2019-09-01", "2019-09-08", "2019-09-15", "2019-09-22", "2019-09-29", "2019-10-06",
		"2019-10-13", "2019-10-20", "2019-10-27", "2019-11-03", "2019-11-10", "2019-11-17"} {
		sundays = append(sundays, at(snapshot.StateComplete, d)...)
	}
	plan, err := Policy{Daily: 4}.Select(sundays, today)
	if err != nil {
		t.Fatal(err)
	}
	want := "2019-10-27 daily\n2019-11-03 daily\n2019-11-10 daily\n2019-11-17 newest-complete,daily"
	if got := kept(plan); got != want || len(plan.Pruned()) != 8 {
		t.Errorf("12 Sundays, --keep-daily 4: kept\n%s\nand pruned %d; want\n%s\nand 8", got, len(plan.Pruned()), want)
	}

	// "Suppose you make one backup every day": --keep-daily 7
	// --keep-weekly 5 --keep-monthly 12 --keep-yearly 75 keeps 7 daily
	// snapshots, 4 more weekly ("the 7 dailies already include 1
	// weekly"; so the newest is a Sunday here), 11 more monthly (one of
	// the 12 is among the dailies) and the yearly ones: 7 years of them
	// (fewer than 75), the newest among the dailies, 2025-12-31 among the
	// monthly.
	plan, err = Policy{Daily: 7, Weekly: 5, Monthly: 12, Yearly: 75}.Select(span("2020-01-01", "2026-11-29", snapshot.StateComplete), today)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, v := range plan.Kept() {
		counts[string(v.Reasons[0])]++
	}
	// Reasons[0] is the finest rule that kept each (newest-complete for
	// the newest, a daily one too).
	if want := map[string]int{"newest-complete": 1, "daily": 6, "weekly": 4, "monthly": 11, "yearly": 5}; !maps.Equal(counts, want) {
		t.Errorf("kept by their finest rule: %v, want %v\n%s", counts, want, kept(plan))
	}
	if n := len(plan.Kept()); n != 27 {
		t.Errorf("kept %d, want 27 (7 + 4 + 11 + 5)", n)
	}
	for _, v := range plan.Verdicts {
		if v.SnapshotID == "2025-12-31" && fmt.Sprint(v.Reasons) != "[monthly yearly]" {
			t.Errorf("2025-12-31 kept by %v, want [monthly yearly]", v.Reasons)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p     Policy
		field string
		is    error
	}{
		{Policy{}, "", ErrNoRule},
		{Policy{Daily: 0, Weekly: 0}, "", ErrNoRule},
		{Policy{KeepDays: days(-1)}, "KeepDays", nil},
		{Policy{Daily: -1}, "Daily", nil},
		{Policy{Weekly: 2, Monthly: -3}, "Monthly", nil},
		{Policy{Yearly: -1}, "Yearly", nil},
		{Policy{Before: "2026-02-30"}, "Before", nil},
		{Policy{Before: "2026-01-01", Daily: 1}, "", ErrBeforeWithRules},
		{Policy{Before: "2026-01-01", KeepDays: days(0)}, "", ErrBeforeWithRules},
	} {
		err := c.p.Validate()
		var pe *PolicyError
		switch {
		case c.is != nil && !errors.Is(err, c.is):
			t.Errorf("%+v: %v, want %v", c.p, err, c.is)
		case c.is == nil && (!errors.As(err, &pe) || pe.Field != c.field):
			t.Errorf("%+v: %v, want a PolicyError on %s", c.p, err, c.field)
		}
		if _, serr := c.p.Select(nil, today); serr == nil || serr.Error() != err.Error() {
			t.Errorf("%+v: Select's error %v, want Validate's", c.p, serr)
		}
	}
	for _, p := range []Policy{{KeepDays: days(0)}, {Daily: 1}, {Yearly: 1}, {Before: "2026-01-01"}} {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	if plan, err := (Policy{Daily: 1}).Select(nil, today); err != nil || plan.Verdicts == nil || len(plan.Verdicts) != 0 {
		t.Errorf("empty list: %+v, %v", plan, err)
	}
}

func TestPolicyCutoffAndString(t *testing.T) {
	t.Parallel()
	local := time.Date(2026, 11, 24, 23, 30, 0, 0, time.FixedZone("UTC-3", -3*3600))
	now := local.UTC() // 2026-11-25 in UTC
	for n, want := range map[int]string{0: "2026-11-25", 1: "2026-11-24", 30: "2026-10-26", 365: "2025-11-25"} {
		if got := (Policy{KeepDays: days(n)}).Cutoff(now); got != want {
			t.Errorf("--keep-days %d: cutoff %s, want %s", n, got, want)
		}
	}
	// The same instant in UTC-3 is still 2026-11-24 there: the days are
	// the zone's of the time given.
	for n, want := range map[int]string{0: "2026-11-24", 1: "2026-11-23", 30: "2026-10-25", 365: "2025-11-24"} {
		if got := (Policy{KeepDays: days(n)}).Cutoff(local); got != want {
			t.Errorf("--keep-days %d in UTC-3: cutoff %s, want %s", n, got, want)
		}
	}
	if plan, err := (Policy{KeepDays: days(0)}).Select(nil, local); err != nil || plan.Today != "2026-11-24" || plan.TimeZone != "UTC-3" {
		t.Errorf("Select in UTC-3: today %s %s, %v; want 2026-11-24 UTC-3", plan.Today, plan.TimeZone, err)
	}
	for _, c := range []struct {
		p            Policy
		cutoff, text string
	}{
		{Policy{Before: "2026-01-01"}, "2026-01-01", "--before 2026-01-01"},
		{Policy{KeepDays: days(30), Monthly: 12}, "", "--keep-days 30 --keep-monthly 12"},
		{Policy{Daily: 7, Weekly: 4, Monthly: 12, Yearly: 5}, "", "--keep-daily 7 --keep-weekly 4 --keep-monthly 12 --keep-yearly 5"},
	} {
		if got := c.p.Cutoff(now); got != c.cutoff {
			t.Errorf("%+v: cutoff %q, want %q", c.p, got, c.cutoff)
		}
		if got := c.p.String(); got != c.text {
			t.Errorf("String = %q, want %q", got, c.text)
		}
	}
	if got := fmt.Sprint(&PolicyError{Field: "Before", Value: "x", Reason: "want a date"}); got != `retention policy: Before "x": want a date` {
		t.Errorf("PolicyError: %s", got)
	}
}
