package retention

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// Policy is which snapshots a prune keeps. It is either a plain cutoff
// (Before alone: every snapshot dated before it goes) or keep rules
// (KeepDays and the period rules, any of them), whose union is kept and
// everything else pruned. The period rules have restic forget's meaning:
// Daily n keeps, for each of the last n days that have a complete
// snapshot, the newest complete snapshot of that day; Weekly (ISO weeks),
// Monthly and Yearly likewise. A period count of 0 is the rule off. In
// every form the newest complete snapshot is kept and a snapshot a
// stopped prune left deleting is pruned (see Select).
type Policy struct {
	// KeepDays, when not nil, keeps every dated snapshot within *KeepDays
	// days of today (in today's time zone: see Select), whatever its state: 0 keeps today's. A pointer
	// because 0 is a rule (today only), not the rule off.
	KeepDays *int `json:"keepDays,omitempty"`
	// Daily, Weekly, Monthly and Yearly count the days, ISO weeks, months
	// and years with a complete snapshot whose newest complete one is kept.
	Daily   int `json:"keepDaily,omitempty"`
	Weekly  int `json:"keepWeekly,omitempty"`
	Monthly int `json:"keepMonthly,omitempty"`
	Yearly  int `json:"keepYearly,omitempty"`
	// Before, a YYYY-MM-DD date, prunes every snapshot dated before it;
	// it excludes every other rule.
	Before string `json:"before,omitempty"`
}

// ErrNoRule is Validate's refusal of a policy without a rule: no
// KeepDays, no Before and every period count 0. Restic refuses an empty
// policy too: a prune that keeps nothing by accident is not undone.
var ErrNoRule = errors.New("retention policy: no rule")

// ErrBeforeWithRules is Validate's refusal of Before given with a keep
// rule: the cutoff is a policy of its own.
var ErrBeforeWithRules = errors.New("retention policy: Before is a cutoff of its own, not combined with keep rules")

// PolicyError refuses one field of a Policy.
type PolicyError struct {
	// Field is the Policy field: KeepDays, Daily, Weekly, Monthly, Yearly
	// or Before.
	Field string
	// Value is the field's value (an int, or Before's string).
	Value any
	// Reason says what the field should be.
	Reason string
}

// Error names the field, its value and what it should be.
func (e *PolicyError) Error() string {
	if s, ok := e.Value.(string); ok {
		return fmt.Sprintf("retention policy: %s %q: %s", e.Field, s, e.Reason)
	}
	return fmt.Sprintf("retention policy: %s %v: %s", e.Field, e.Value, e.Reason)
}

// Validate refuses a negative count (*PolicyError), a Before that is not
// a real date (*PolicyError), Before with a keep rule
// (ErrBeforeWithRules) and a policy without a rule (ErrNoRule).
func (p Policy) Validate() error {
	if p.KeepDays != nil && *p.KeepDays < 0 {
		return &PolicyError{Field: "KeepDays", Value: *p.KeepDays, Reason: "want 0 or more"}
	}
	for _, r := range p.periodRules() {
		if r.left < 0 {
			return &PolicyError{Field: r.field, Value: r.left, Reason: "want 0 or more (0: the rule off)"}
		}
	}
	keep := p.KeepDays != nil || p.anyPeriod()
	switch {
	case p.Before != "" && !model.ValidDate(p.Before):
		return &PolicyError{Field: "Before", Value: p.Before, Reason: "want a real YYYY-MM-DD date"}
	case p.Before != "" && keep:
		return ErrBeforeWithRules
	case p.Before == "" && !keep:
		return ErrNoRule
	}
	return nil
}

// Cutoff is the date before which the policy prunes every snapshot, when
// it is a plain cutoff: Before, or the first date KeepDays keeps when it
// is the only rule. "" when a period rule is given: the dates it prunes
// are not those before a date.
func (p Policy) Cutoff(today time.Time) string {
	switch {
	case p.Before != "":
		return p.Before
	case p.KeepDays != nil && !p.anyPeriod():
		return keepFrom(today, *p.KeepDays)
	}
	return ""
}

// anyPeriod reports whether a period rule is on: a count above 0.
func (p Policy) anyPeriod() bool {
	return slices.ContainsFunc(p.periodRules(), func(r periodRule) bool { return r.left > 0 })
}

// keepFrom is the first date, YYYY-MM-DD, within days of today, in
// today's own location: the caller's time zone decides where a day ends.
func keepFrom(today time.Time, days int) string {
	return today.AddDate(0, 0, -days).Format(time.DateOnly)
}

// String is the policy as the CLI's flags spell it, rules off left out.
func (p Policy) String() string {
	var b strings.Builder
	add := func(flag string, v any) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "--%s %v", flag, v)
	}
	if p.KeepDays != nil {
		add("keep-days", *p.KeepDays)
	}
	for _, r := range p.periodRules() {
		if r.left != 0 {
			add("keep-"+string(r.reason), r.left)
		}
	}
	if p.Before != "" {
		add("before", p.Before)
	}
	return b.String()
}

// Reason says why a Plan keeps a snapshot, or prunes one whatever the
// rules.
type Reason string

// The reasons of a Verdict. The period rules' are named as restic names
// them, without its " snapshot".
const (
	// ReasonNewestComplete keeps the newest complete snapshot, whatever
	// the policy: the application always has one to read.
	ReasonNewestComplete Reason = "newest-complete"
	// ReasonDaily, ReasonWeekly, ReasonMonthly and ReasonYearly: the
	// newest complete snapshot of one of the last Daily days (Weekly ISO
	// weeks, Monthly months, Yearly years) that have a complete one.
	ReasonDaily   Reason = "daily"
	ReasonWeekly  Reason = "weekly"
	ReasonMonthly Reason = "monthly"
	ReasonYearly  Reason = "yearly"
	// ReasonKeepDays: dated within KeepDays days of today.
	ReasonKeepDays Reason = "keep-days"
	// ReasonNewerThanNewestComplete keeps, under keep rules, an
	// incomplete snapshot dated after the newest complete one (or any
	// incomplete one when none is complete): a write or a repair may be at
	// work on it or due.
	ReasonNewerThanNewestComplete Reason = "newer-than-newest-complete"
	// ReasonCutoff keeps, under Before, a snapshot dated Before or later.
	ReasonCutoff Reason = "cutoff"
	// ReasonDeleting prunes a snapshot a stopped prune left deleting,
	// whatever the policy: nothing of it is readable any more.
	ReasonDeleting Reason = "deleting"
)

// Verdict is what a Plan does with one dated snapshot, and why.
type Verdict struct {
	SnapshotID string         `json:"snapshotId"`
	State      snapshot.State `json:"state"`
	Districts  int            `json:"districts"`
	// Keep is true when a reason keeps the snapshot; else it is pruned.
	Keep bool `json:"keep"`
	// Reasons are the rules that keep it, in the order of the Reason
	// constants, or ReasonDeleting for one pruned whatever the rules;
	// empty (never nil) for one no rule keeps.
	Reasons []Reason `json:"reasons"`
}

// Plan is Policy.Select's choice: every dated snapshot's verdict.
type Plan struct {
	Policy Policy `json:"policy"`
	// Today is the date KeepDays counted from, in TimeZone.
	Today string `json:"today"`
	// TimeZone is the time zone of Today: the location of the time
	// Select was given ("UTC", "Europe/Berlin").
	TimeZone string `json:"timeZone"`
	// Cutoff is Policy.Cutoff: "" unless the policy is a plain cutoff.
	Cutoff string `json:"cutoff,omitempty"`
	// NewestComplete is the newest complete snapshot whose id is a date
	// ("" when there is none); it is always kept.
	NewestComplete string `json:"newestComplete,omitempty"`
	// Verdicts are every snapshot whose id is a date, oldest first; roots
	// whose id is not a date are left alone and not listed.
	Verdicts []Verdict `json:"verdicts"`
}

// Kept are the verdicts that keep their snapshot, oldest first.
func (p Plan) Kept() []Verdict {
	return slices.DeleteFunc(slices.Clone(p.Verdicts), func(v Verdict) bool { return !v.Keep })
}

// Pruned are the verdicts that prune their snapshot, oldest first.
func (p Plan) Pruned() []Verdict {
	return slices.DeleteFunc(slices.Clone(p.Verdicts), func(v Verdict) bool { return v.Keep })
}

// Select gives every dated snapshot of list (as snapshot.Reader.List
// returns it) its verdict under the policy, today (its date in its own
// location: pass time.Now().In(loc) for the days of loc) being the day
// KeepDays counts from. It walks the snapshots newest first, as
// restic does: each period rule keeps a complete snapshot whose period
// (day, ISO week, month, year) differs from the last it kept, while its
// count lasts; incomplete snapshots neither count for nor are kept by a
// period rule. Whatever the policy, the newest complete snapshot is kept
// and one left deleting is pruned. Under keep rules an incomplete
// snapshot dated after the newest complete one is kept (a write or repair
// may be at work or due); an older one is pruned unless KeepDays keeps
// it. Under Before it is a plain cutoff: every other snapshot dated
// before it is pruned, whatever its state. An invalid policy is
// Validate's error.
func (p Policy) Select(list []snapshot.Summary, today time.Time) (Plan, error) {
	if err := p.Validate(); err != nil {
		return Plan{}, err
	}
	plan := Plan{Policy: p, Today: today.Format(time.DateOnly), TimeZone: today.Location().String(), Cutoff: p.Cutoff(today), Verdicts: []Verdict{}}
	var dated []snapshot.Summary
	for _, s := range list {
		if model.ValidDate(s.SnapshotID) {
			dated = append(dated, s)
		}
	}
	// Newest first, as the period rules walk them.
	slices.SortFunc(dated, func(a, b snapshot.Summary) int { return strings.Compare(b.SnapshotID, a.SnapshotID) })
	for _, s := range dated {
		if s.State == snapshot.StateComplete {
			plan.NewestComplete = s.SnapshotID
			break
		}
	}
	from := ""
	if p.KeepDays != nil {
		from = keepFrom(today, *p.KeepDays)
	}
	rules := p.periodRules()
	for _, s := range dated {
		v := Verdict{SnapshotID: s.SnapshotID, State: s.State, Districts: s.Districts, Reasons: []Reason{}}
		id, complete := s.SnapshotID, s.State == snapshot.StateComplete
		switch {
		case s.State == snapshot.StateDeleting:
			v.Reasons = append(v.Reasons, ReasonDeleting)
		case p.Before != "":
			if id == plan.NewestComplete {
				v.Reasons = append(v.Reasons, ReasonNewestComplete)
			}
			if id >= p.Before {
				v.Reasons = append(v.Reasons, ReasonCutoff)
			}
		default:
			if id == plan.NewestComplete {
				v.Reasons = append(v.Reasons, ReasonNewestComplete)
			}
			if complete {
				day, _ := time.Parse(time.DateOnly, id) // a valid date
				for i := range rules {
					if rules[i].take(day) {
						v.Reasons = append(v.Reasons, rules[i].reason)
					}
				}
			}
			if from != "" && id >= from {
				v.Reasons = append(v.Reasons, ReasonKeepDays)
			}
			if !complete && id > plan.NewestComplete {
				v.Reasons = append(v.Reasons, ReasonNewerThanNewestComplete)
			}
		}
		v.Keep = s.State != snapshot.StateDeleting && len(v.Reasons) > 0
		plan.Verdicts = append(plan.Verdicts, v)
	}
	slices.Reverse(plan.Verdicts)
	return plan, nil
}

// periodRule is one period rule as Select walks it: left is the count it
// has left, last the period of the snapshot it kept last.
type periodRule struct {
	field  string // the Policy field
	reason Reason
	period func(day time.Time) string
	left   int
	last   string
}

// take reports whether the rule keeps the complete snapshot of day, the
// next one newest first: when the rule is on, has count left and day's
// period is not the one it kept last (restic's bucket walk).
func (r *periodRule) take(day time.Time) bool {
	if r.left <= 0 {
		return false
	}
	period := r.period(day)
	if period == r.last {
		return false
	}
	r.last = period
	r.left--
	return true
}

// periodRules are the policy's period rules, in the order of their
// reasons, each with its full count left.
func (p Policy) periodRules() []periodRule {
	return []periodRule{
		{field: "Daily", reason: ReasonDaily, left: p.Daily, period: func(d time.Time) string { return d.Format(time.DateOnly) }},
		{field: "Weekly", reason: ReasonWeekly, left: p.Weekly, period: func(d time.Time) string {
			y, w := d.ISOWeek()
			return fmt.Sprintf("%04d-W%02d", y, w)
		}},
		{field: "Monthly", reason: ReasonMonthly, left: p.Monthly, period: func(d time.Time) string { return d.Format("2006-01") }},
		{field: "Yearly", reason: ReasonYearly, left: p.Yearly, period: func(d time.Time) string { return d.Format("2006") }},
	}
}
