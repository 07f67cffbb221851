package gate

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/snapwriter/snapwriter/model"
)

// Rule names the check that holds a publication.
type Rule string

// The gate's rules.
const (
	// RuleCount holds when live districts (of the newest complete snapshot,
	// the baseline) are missing from the input; it names them.
	RuleCount Rule = "count"
	// RuleRemoved holds when a rewrite drops a district the stored date
	// has: always, whatever the options.
	RuleRemoved Rule = "removed"
	// RuleValue holds when a district's values changed outside the closing
	// period, unless Options.AllowValueChanges.
	RuleValue Rule = "value"
	// RuleClosing holds a change the month-end closing rule does not allow
	// (unless Options.AllowValueChanges).
	RuleClosing Rule = "closing"
	// RuleCompare holds when a comparison failed (a read or a decode).
	RuleCompare Rule = "compare"
)

// ruleOrder is the order of the holds in a report: the count first, as the
// broadest, then what a rewrite drops, changes, and failures.
func ruleOrder() []Rule { return []Rule{RuleCount, RuleRemoved, RuleValue, RuleClosing, RuleCompare} }

// Hold is one rule that holds the publication, with what it concerns.
type Hold struct {
	// Rule is the rule that holds.
	Rule Rule `json:"rule"`
	// Message says in words why, for people and for the ERROR log line.
	Message string `json:"message"`
	// Districts are the districts involved, sorted (numeric ids by value,
	// then the others); omitted when none.
	Districts []string `json:"districts,omitempty"`
	// Fields are the distinct fields involved (Change.Field), sorted;
	// omitted when none.
	Fields []string `json:"fields,omitempty"`
}

// Baseline is the snapshot the count check compared the input with.
type Baseline struct {
	// SnapshotID is the newest complete snapshot's id; "" when there was
	// none (or no count check).
	SnapshotID string `json:"snapshotId"`
	// Districts is how many districts it has live.
	Districts int `json:"districts"`
}

// Districts counts and names the districts of a report.
type Districts struct {
	// Input is how many districts the new side has.
	Input int `json:"input"`
	// Added are the districts the new side has and the baseline or the
	// stored date lacks (they pass), sorted; [] when none.
	Added []string `json:"added"`
	// Removed are the districts the new side lacks and the baseline or the
	// stored date has (they hold), sorted; [] when none.
	Removed []string `json:"removed"`
	// Changed are the districts with at least one change, sorted; [] when
	// none.
	Changed []string `json:"changed"`
	// Unchanged is how many districts were compared and found equal.
	Unchanged int `json:"unchanged"`
}

// Value is a field's value in a report, or its absence: JSON omits an
// absent value (with omitzero) and writes a present null as null.
type Value struct {
	// V is the value, in canonical form.
	V any
	// Present is false when the field is absent on its side.
	Present bool
}

// IsZero reports an absent value, so that `omitzero` omits it.
func (v Value) IsZero() bool { return !v.Present }

// MarshalJSON writes the value as canonical JSON (model.Marshal).
func (v Value) MarshalJSON() ([]byte, error) { return model.Marshal(v.V) }

// UnmarshalJSON reads a value back in canonical form (integers as int64):
// a value that is in the JSON is present, even a null.
func (v *Value) UnmarshalJSON(b []byte) error {
	// model decodes objects to canonical form; a one-member object carries
	// any value through it.
	o, err := model.DecodeObject(io.MultiReader(strings.NewReader(`{"v":`), bytes.NewReader(b), strings.NewReader(`}`)))
	if err != nil {
		return err
	}
	*v = Value{V: o["v"], Present: true}
	return nil
}

// ChangeJSON is one judged change of a district as a report carries it.
type ChangeJSON struct {
	// Field is the rendered path (Change.Field).
	Field string `json:"field"`
	// Class is the policy's class of the field.
	Class Class `json:"class"`
	// Kind is changed, added or removed.
	Kind Kind `json:"kind"`
	// Old is the stored value; omitted when the field was absent (added).
	Old Value `json:"old,omitzero"`
	// New is the input's value; omitted when the field is absent (removed).
	New Value `json:"new,omitzero"`
	// Verdict is what the gate said of the change: holds, allowed or
	// ignored.
	Verdict Verdict `json:"verdict"`
	// Reason says why in words.
	Reason string `json:"reason"`
	// AllowedBy says which allowed it: "closing" (the month-end closing
	// rule) or "operator" (--allow-value-changes); omitted otherwise.
	AllowedBy string `json:"allowedBy,omitempty"`
}

// Who allowed a change (ChangeJSON.AllowedBy).
const (
	byClosing  = "closing"
	byOperator = "operator"
)

// DistrictDiff is the changes of one changed district.
type DistrictDiff struct {
	// DistrictID is the district's id.
	DistrictID string `json:"districtId"`
	// Changes are its changed fields, sorted by field.
	Changes []ChangeJSON `json:"changes"`
}

// AllowedDelta is one change the month-end closing rule allowed: the
// provenance a snapshot that passed by the rule records.
type AllowedDelta struct {
	DistrictID string `json:"districtId"`
	Field      string `json:"field"`
	Class      Class  `json:"class"`
	Old        Value  `json:"old,omitzero"`
	New        Value  `json:"new,omitzero"`
}

// Report is the gate's decision and what `snapwriter diff` prints. Its JSON
// is stable: fields are only ever added.
type Report struct {
	// SnapshotID is the date of the snapshot being checked (the input's).
	SnapshotID string `json:"snapshotId"`
	// Held is true when any rule holds: len(Holds) > 0.
	Held bool `json:"held"`
	// Holds are the rules that hold, one per rule, in the order count,
	// removed, value, closing, compare; [] when none.
	Holds []Hold `json:"holds"`
	// ClosingPeriod is true when the month-end closing rule judged the
	// changes (Options.Closing).
	ClosingPeriod bool `json:"closingPeriod"`
	// AllowValueChanges is true when the operator allowed value changes
	// (Options.AllowValueChanges).
	AllowValueChanges bool `json:"allowValueChanges"`
	// PassedByClosingRule is true when values changed, nothing holds, and
	// the closing rule alone let them through (no change needed
	// AllowValueChanges).
	PassedByClosingRule bool `json:"passedByClosingRule"`
	// Baseline is the newest complete snapshot the count check used; empty
	// when none.
	Baseline Baseline `json:"baseline"`
	// Compared is the stored date the value check read; "" when none.
	Compared string `json:"compared"`
	// Districts counts and names the districts.
	Districts Districts `json:"districts"`
	// Changes are the changed districts' changes, by district id; [] when
	// none.
	Changes []DistrictDiff `json:"changes"`
}

// Changed reports whether any district was added, removed or changed:
// diff's --exit-code.
func (r *Report) Changed() bool {
	d := r.Districts
	return len(d.Added)+len(d.Removed)+len(d.Changed) > 0
}

// Allowed returns the deltas the month-end closing rule allowed, by district
// and field, when the snapshot passed by that rule (PassedByClosingRule);
// nil otherwise, because a held snapshot records nothing.
func (r *Report) Allowed() []AllowedDelta {
	if !r.PassedByClosingRule {
		return nil
	}
	var out []AllowedDelta
	for _, d := range r.Changes {
		for _, c := range d.Changes {
			if c.AllowedBy == byClosing {
				out = append(out, AllowedDelta{DistrictID: d.DistrictID, Field: c.Field, Class: c.Class, Old: c.Old, New: c.New})
			}
		}
	}
	return out
}

// Options are what a Check judges by.
type Options struct {
	// Policy classes the fields; nil is DefaultPolicy().
	Policy *Policy
	// AllowValueChanges lets changed values through (never a removal).
	AllowValueChanges bool
	// Closing applies the month-end closing rule (IsClosingPeriod).
	Closing bool
}

// Check accumulates the gate's decision district by district, so that a
// caller streams rows through it and never holds them all: it keeps only
// ids and the changes found. It is not safe for concurrent use.
type Check struct {
	id       string
	o        Options
	baseline Baseline
	compared string
	input    map[string]bool
	added    map[string]bool
	removed  map[string]bool
	// unchanged counts districts compared equal.
	unchanged int
	diffs     []DistrictDiff
	holds     map[Rule]*holdAcc
	// operator is set when a change passed only by AllowValueChanges.
	operator bool
}

// holdAcc gathers one rule's holds.
type holdAcc struct {
	districts map[string]bool
	fields    map[string]bool
	changes   int
	messages  []string
}

// NewCheck starts the check of snapshot snapshotID.
func NewCheck(snapshotID string, o Options) *Check {
	if o.Policy == nil {
		o.Policy = DefaultPolicy()
	}
	return &Check{
		id: snapshotID, o: o,
		input: map[string]bool{}, added: map[string]bool{}, removed: map[string]bool{},
		holds: map[Rule]*holdAcc{},
	}
}

func (c *Check) hold(r Rule) *holdAcc {
	h := c.holds[r]
	if h == nil {
		h = &holdAcc{districts: map[string]bool{}, fields: map[string]bool{}}
		c.holds[r] = h
	}
	return h
}

// Baseline runs the count rule against the newest complete snapshot id,
// whose live districts are live, for an input of the districts input:
// every live district missing from the input holds (RuleCount), also when
// the counts are equal (a swap hides a loss); input districts that are not
// live are added, and pass.
func (c *Check) Baseline(id string, live []string, input []string) {
	c.baseline = Baseline{SnapshotID: id, Districts: len(live)}
	in := make(map[string]bool, len(input))
	for _, d := range input {
		in[d] = true
		c.input[d] = true
	}
	isLive := make(map[string]bool, len(live))
	for _, d := range live {
		isLive[d] = true
		if !in[d] {
			c.removed[d] = true
			c.hold(RuleCount).districts[d] = true
		}
	}
	for _, d := range input {
		if !isLive[d] {
			c.added[d] = true
		}
	}
}

// Stored names the stored date the value check compares against.
func (c *Check) Stored(id string) { c.compared = id }

// District checks one district: old is the stored row, new the input's.
// old nil: the district is added (passes); new nil: it is removed (holds
// under RuleRemoved, always); both: their changes are judged. Outside the
// closing period any change holds under RuleValue unless AllowValueChanges;
// in it, Closing judges each change and one that holds holds under
// RuleClosing (unless AllowValueChanges).
func (c *Check) District(id string, old, new *Row) {
	switch {
	case old == nil && new == nil:
		return
	case old == nil:
		c.input[id] = true
		c.added[id] = true
		return
	case new == nil:
		c.removed[id] = true
		c.hold(RuleRemoved).districts[id] = true
		return
	}
	c.input[id] = true
	changes := Compare(c.o.Policy, *old, *new)
	if len(changes) == 0 {
		c.unchanged++
		return
	}
	d := DistrictDiff{DistrictID: id, Changes: make([]ChangeJSON, 0, len(changes))}
	for _, ch := range changes {
		j := ChangeJSON{Field: ch.Field, Class: ch.Class, Kind: ch.Kind,
			Old: Value{ch.Old, ch.Kind != Added}, New: Value{ch.New, ch.Kind != Removed}}
		rule := RuleValue
		if c.o.Closing {
			rule = RuleClosing
			j.Verdict, j.Reason = Closing(ch)
			if j.Verdict == Allowed {
				j.AllowedBy = byClosing
			}
		} else {
			j.Verdict, j.Reason = Holds, valueReason(ch.Kind)
		}
		if j.Verdict == Holds {
			if c.o.AllowValueChanges {
				j.Verdict, j.AllowedBy = Allowed, byOperator
				j.Reason = "allowed by --allow-value-changes: " + j.Reason
				c.operator = true
			} else {
				h := c.hold(rule)
				h.districts[id] = true
				h.fields[ch.Field] = true
				h.changes++
			}
		}
		d.Changes = append(d.Changes, j)
	}
	c.diffs = append(c.diffs, d)
}

func valueReason(k Kind) string {
	switch k {
	case Added:
		return "field appeared"
	case Removed:
		return "field disappeared"
	}
	return "value changed"
}

// Fail records a comparison that failed (what: the step, err: why): it
// holds under RuleCompare, because an unchecked district is not a checked
// one.
func (c *Check) Fail(what string, err error) {
	h := c.hold(RuleCompare)
	h.messages = append(h.messages, fmt.Sprintf("%s: %v", what, err))
}

// Report returns the decision so far. The check may go on after it.
func (c *Check) Report() *Report {
	r := &Report{
		SnapshotID:        c.id,
		Holds:             []Hold{},
		ClosingPeriod:     c.o.Closing,
		AllowValueChanges: c.o.AllowValueChanges,
		Baseline:          c.baseline,
		Compared:          c.compared,
		Changes:           append([]DistrictDiff{}, c.diffs...),
	}
	slices.SortStableFunc(r.Changes, func(a, b DistrictDiff) int { return compareIDs(a.DistrictID, b.DistrictID) })
	changed := make([]string, len(r.Changes))
	for i, d := range r.Changes {
		changed[i] = d.DistrictID
	}
	r.Districts = Districts{
		Input:     len(c.input),
		Added:     sortedIDs(c.added),
		Removed:   sortedIDs(c.removed),
		Changed:   changed,
		Unchanged: c.unchanged,
	}
	for _, rule := range ruleOrder() {
		h := c.holds[rule]
		if h == nil {
			continue
		}
		hold := Hold{Rule: rule, Message: c.message(rule, h), Districts: sortedIDs(h.districts)}
		if len(h.fields) > 0 {
			hold.Fields = slices.Sorted(maps.Keys(h.fields))
		}
		if len(hold.Districts) == 0 {
			hold.Districts = nil
		}
		r.Holds = append(r.Holds, hold)
	}
	r.Held = len(r.Holds) > 0
	r.PassedByClosingRule = c.o.Closing && !r.Held && len(r.Changes) > 0 && !c.operator
	return r
}

// message says in words why rule holds.
func (c *Check) message(rule Rule, h *holdAcc) string {
	n := len(h.districts)
	switch rule {
	case RuleCount:
		return fmt.Sprintf("%s of the %d live in the newest complete snapshot %s %s missing from the input",
			plural(n, "district", "districts"), c.baseline.Districts, c.baseline.SnapshotID, isAre(n))
	case RuleRemoved:
		stored := cmp.Or(c.compared, c.id)
		return fmt.Sprintf("the input drops %s that stored %s has", plural(n, "district", "districts"), stored)
	case RuleValue:
		return fmt.Sprintf("%s changed values (%s); allow a deliberate re-derivation with --allow-value-changes",
			plural(n, "district", "districts"), plural(h.changes, "change", "changes"))
	case RuleClosing:
		return fmt.Sprintf("%s in %s %s outside the month-end closing rule",
			plural(h.changes, "change", "changes"), plural(n, "district", "districts"), isAre(h.changes))
	}
	m := "comparison failed: " + h.messages[0]
	if len(h.messages) > 1 {
		m += fmt.Sprintf(" (and %d more)", len(h.messages)-1)
	}
	return m
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// sortedIDs returns a set's district ids in compareIDs order, [] when empty.
func sortedIDs(set map[string]bool) []string {
	ids := slices.Collect(maps.Keys(set))
	slices.SortFunc(ids, compareIDs)
	if ids == nil {
		ids = []string{}
	}
	return ids
}

// compareIDs orders district ids as people count them: numeric ids by value
// ("2" before "10"), then the others ("F", "U") alphabetically.
func compareIDs(a, b string) int {
	na, nb := digits(a), digits(b)
	switch {
	case na && nb:
		ta, tb := strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		return cmp.Or(cmp.Compare(len(ta), len(tb)), strings.Compare(ta, tb), strings.Compare(a, b))
	case na:
		return -1
	case nb:
		return 1
	}
	return strings.Compare(a, b)
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Limits of the text report, so a run over 5,000 districts stays readable.
const (
	maxListed   = 50
	maxValueLen = 60
)

// WriteText writes the report for people: a summary line; the districts
// added (`+ district 133 (added)`), removed (`- district 42 (removed)`) and
// changed (`~ district 7`, then one indented line per field: `field: old →
// new  (class; verdict: reason)`), at most 50 districts of each and 50
// fields of a district with "… and N more";
// then one `held: <rule>: <message>` line per hold, or `passes`, or
// `passes by the month-end closing rule (N deltas allowed)`. Values are
// canonical JSON cut at 60 characters with "…"; an absent one is (absent).
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	d := r.Districts
	fmt.Fprintf(&b, "snapshot %s: %s in the input; %d added, %d removed, %d changed, %d unchanged",
		r.SnapshotID, plural(d.Input, "district", "districts"), len(d.Added), len(d.Removed), len(d.Changed), d.Unchanged)
	if r.Baseline.SnapshotID != "" {
		fmt.Fprintf(&b, "; baseline %s (%s)", r.Baseline.SnapshotID, plural(r.Baseline.Districts, "district", "districts"))
	}
	if r.Compared != "" {
		fmt.Fprintf(&b, "; compared with stored %s", r.Compared)
	}
	if r.ClosingPeriod {
		b.WriteString("; month-end closing rule applies")
	}
	b.WriteString("\n")
	list := func(ids []string, sign, what string) {
		for i, id := range ids {
			if i == maxListed {
				fmt.Fprintf(&b, "… and %d more %s\n", len(ids)-maxListed, what)
				break
			}
			fmt.Fprintf(&b, "%s district %s (%s)\n", sign, id, what)
		}
	}
	list(d.Added, "+", "added")
	list(d.Removed, "-", "removed")
	for i, dd := range r.Changes {
		if i == maxListed {
			fmt.Fprintf(&b, "… and %d more changed\n", len(r.Changes)-maxListed)
			break
		}
		fmt.Fprintf(&b, "~ district %s\n", dd.DistrictID)
		for j, c := range dd.Changes {
			if j == maxListed {
				fmt.Fprintf(&b, "    … and %d more fields\n", len(dd.Changes)-maxListed)
				break
			}
			fmt.Fprintf(&b, "    %s: %s → %s  (%s; %s: %s)\n", c.Field, textValue(c.Old), textValue(c.New), c.Class, c.Verdict, c.Reason)
		}
	}
	for _, h := range r.Holds {
		fmt.Fprintf(&b, "held: %s: %s\n", h.Rule, h.Message)
		if len(h.Districts) > 0 {
			fmt.Fprintf(&b, "    districts: %s\n", capList(h.Districts))
		}
		if len(h.Fields) > 0 {
			fmt.Fprintf(&b, "    fields: %s\n", capList(h.Fields))
		}
	}
	switch {
	case r.Held:
	case r.PassedByClosingRule:
		fmt.Fprintf(&b, "passes by the month-end closing rule (%s allowed)\n", plural(len(r.Allowed()), "delta", "deltas"))
	default:
		b.WriteString("passes\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// capList joins at most maxListed items, saying how many more there are.
func capList(l []string) string {
	if len(l) <= maxListed {
		return strings.Join(l, ", ")
	}
	return strings.Join(l[:maxListed], ", ") + fmt.Sprintf(" … and %d more", len(l)-maxListed)
}

// textValue renders a value for the text report.
func textValue(v Value) string {
	if !v.Present {
		return "(absent)"
	}
	s := show(v.V)
	if utf8.RuneCountInString(s) <= maxValueLen {
		return s
	}
	r := []rune(s)
	return string(r[:maxValueLen]) + "…"
}
