package gate

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/snapwriter/snapwriter/model"
)

// Verdict is what a rule says of one change.
type Verdict string

// The verdicts.
const (
	// Holds means the change stops the publication.
	Holds Verdict = "holds"
	// Allowed means the change may be published.
	Allowed Verdict = "allowed"
	// Ignored means the rule does not look at the field.
	Ignored Verdict = "ignored"
)

// Closing judges one change under the month-end closing rule, and says why
// in words. A field that appears or disappears holds whatever its class
// (even a derived one: a new rank is a new shape, not a reconciled number);
// otherwise by class: Counter: both numbers and |new-old| ≤ max(50, 10 % of
// |old|) → Allowed, else Holds; Identity: Holds; Plan: false → true (or
// "N" → "Y") Allowed, else Holds; Derived and Volatile: Ignored;
// Unclassified: Holds.
func Closing(c Change) (Verdict, string) {
	if c.Class == Volatile {
		return Ignored, "volatile metadata is never compared"
	}
	switch c.Kind {
	case Added:
		return Holds, "field appeared"
	case Removed:
		return Holds, "field disappeared"
	}
	switch c.Class {
	case Counter:
		o, ok1 := number(c.Old)
		n, ok2 := number(c.New)
		if !ok1 || !ok2 {
			return Holds, "counter is not a number on both sides"
		}
		delta, bound := math.Abs(n-o), CounterBound(o)
		if delta <= bound {
			return Allowed, fmt.Sprintf("moved by %s, within its bound of %s", num(delta), num(bound))
		}
		return Holds, fmt.Sprintf("moved by %s, over its bound of %s", num(delta), num(bound))
	case Identity:
		return Holds, "identity field changed"
	case Plan:
		if (c.Old == false && c.New == true) || (c.Old == "N" && c.New == "Y") {
			return Allowed, fmt.Sprintf("plan went %s → %s", show(c.Old), show(c.New))
		}
		return Holds, fmt.Sprintf("plan went %s → %s", show(c.Old), show(c.New))
	case Derived:
		return Ignored, "derived field: follows from the others"
	}
	return Holds, "not classified by the policy"
}

// CounterBound is max(50, 10 % of |stored|): the closing rule's bound for a
// counter whose stored value is stored.
func CounterBound(stored float64) float64 {
	// A tenth by division, not 0.1 * x: 1000/10 is exactly 100.
	return math.Max(50, math.Abs(stored)/10)
}

// IsClosingPeriod reports whether the month-end closing rule applies to a
// snapshot of date (YYYY-MM-DD) whose input metadata says closing
// (isClosingPeriodData; nil = false) and collectionDate (YYYY-MM-DD or RFC
// 3339; "" = unknown → false): date is the last day of its month, closing
// is true, and collectionDate is after date by at most 31 days. An RFC 3339
// collectionDate counts by its calendar day as written (its own offset).
func IsClosingPeriod(date string, closing *bool, collectionDate string) bool {
	if closing == nil || !*closing {
		return false
	}
	d, err := time.Parse(time.DateOnly, date)
	if err != nil || d.AddDate(0, 0, 1).Day() != 1 {
		return false
	}
	c, err := time.Parse(time.DateOnly, collectionDate)
	if err != nil {
		t, err := time.Parse(time.RFC3339, collectionDate)
		if err != nil {
			return false
		}
		c = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	}
	days := int(c.Sub(d).Hours() / 24)
	return days >= 1 && days <= 31
}

// number returns a canonical number as a float64.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// show renders a value for a reason or the text report: its canonical JSON,
// as stored (a double keeps its ".0", so a type change shows).
func show(v any) string {
	b, err := model.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
