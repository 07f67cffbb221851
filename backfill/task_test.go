package backfill

import (
	"errors"
	"testing"
)

func TestCheckRange(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		from, to string
		want     *RangeError // nil: accepted
		msg      string
	}{
		{"", "", nil, ""},
		{"2026-02-27", "", nil, ""},
		{"", "2026-03-01", nil, ""},
		{"2026-03-01", "2026-03-01", nil, ""},
		{"2026-02-30", "", &RangeError{From: "2026-02-30", End: "from", Date: "2026-02-30"}, `from "2026-02-30": want a real YYYY-MM-DD date`},
		{"", "2026-13-01", &RangeError{To: "2026-13-01", End: "to", Date: "2026-13-01"}, `to "2026-13-01": want a real YYYY-MM-DD date`},
		{"x", "y", &RangeError{From: "x", To: "y", End: "from", Date: "x"}, ""},
		{"2026-03-02", "2026-03-01", &RangeError{From: "2026-03-02", To: "2026-03-01"}, "from 2026-03-02 is after to 2026-03-01"},
	} {
		err := CheckRange(c.from, c.to)
		var re *RangeError
		switch {
		case c.want == nil && err != nil:
			t.Errorf("CheckRange(%q, %q) = %v, want nil", c.from, c.to, err)
		case c.want != nil && (!errors.As(err, &re) || *re != *c.want):
			t.Errorf("CheckRange(%q, %q) = %#v, want %#v", c.from, c.to, err, c.want)
		case c.msg != "" && err.Error() != c.msg:
			t.Errorf("CheckRange(%q, %q): %q, want %q", c.from, c.to, err, c.msg)
		}
	}
}
