package gate

import (
	"strings"
	"testing"
)

func TestClosing(t *testing.T) {
	counter := func(old, new any) Change { return Change{Class: Counter, Kind: Changed, Old: old, New: new} }
	for _, tc := range []struct {
		name   string
		c      Change
		want   Verdict
		reason string
	}{
		// stored 100: bound 50.
		{"counter up at bound", counter(int64(100), int64(150)), Allowed, "moved by 50, within its bound of 50"},
		{"counter up past bound", counter(int64(100), int64(151)), Holds, "moved by 51, over its bound of 50"},
		{"counter down at bound", counter(int64(100), int64(50)), Allowed, "within"},
		{"counter down past bound", counter(int64(100), int64(49)), Holds, "over its bound of 50"},
		{"counter small stored", counter(int64(0), int64(50)), Allowed, "within"},
		// stored 1000: bound 100.
		{"counter 1000 up at bound", counter(int64(1000), int64(1100)), Allowed, "moved by 100, within its bound of 100"},
		{"counter 1000 up past bound", counter(int64(1000), int64(1101)), Holds, "moved by 101, over its bound of 100"},
		{"counter 1000 down at bound", counter(int64(1000), int64(900)), Allowed, "within"},
		{"counter 1000 down past bound", counter(int64(1000), int64(899)), Holds, "over"},
		{"counter negative stored", counter(int64(-1000), int64(-1100)), Allowed, "within its bound of 100"},
		{"counter as double", counter(float64(1000), int64(1100)), Allowed, "within"},
		{"counter not a number", counter(int64(1), "2"), Holds, "not a number"},
		{"counter null", counter(nil, int64(2)), Holds, "not a number"},
		{"identity", Change{Class: Identity, Kind: Changed, Old: "A", New: "B"}, Holds, "identity field changed"},
		{"plan false to true", Change{Class: Plan, Kind: Changed, Old: false, New: true}, Allowed, "plan went false → true"},
		{"plan N to Y", Change{Class: Plan, Kind: Changed, Old: "N", New: "Y"}, Allowed, `plan went "N" → "Y"`},
		{"plan true to false", Change{Class: Plan, Kind: Changed, Old: true, New: false}, Holds, "plan went true → false"},
		{"plan Y to N", Change{Class: Plan, Kind: Changed, Old: "Y", New: "N"}, Holds, "plan went"},
		{"derived", Change{Class: Derived, Kind: Changed, Old: 1.5, New: 99.0}, Ignored, "derived"},
		{"volatile", Change{Class: Volatile, Kind: Changed, Old: "a", New: "b"}, Ignored, "never compared"},
		{"unclassified", Change{Class: Unclassified, Kind: Changed, Old: int64(1), New: int64(2)}, Holds, "not classified by the policy"},
		{"added field", Change{Class: Counter, Kind: Added, New: int64(1)}, Holds, "field appeared"},
		{"added derived field", Change{Class: Derived, Kind: Added, New: int64(1)}, Holds, "field appeared"},
		{"removed field", Change{Class: Counter, Kind: Removed, Old: int64(1)}, Holds, "field disappeared"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, reason := Closing(tc.c)
			if v != tc.want || !strings.Contains(reason, tc.reason) {
				t.Errorf("Closing = %s, %q; want %s, …%q…", v, reason, tc.want, tc.reason)
			}
		})
	}
}

func TestCounterBound(t *testing.T) {
	for stored, want := range map[float64]float64{0: 50, 100: 50, 499: 50, 500: 50, 1000: 100, -1000: 100, 12345: 1234.5} {
		if got := CounterBound(stored); got != want {
			t.Errorf("CounterBound(%v) = %v, want %v", stored, got, want)
		}
	}
}

func TestIsClosingPeriod(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		date       string
		closing    *bool
		collection string
		want       bool
	}{
		{"2026-11-30", &yes, "2026-12-01", true},
		{"2026-11-30", &yes, "2026-12-31", true},  // +31
		{"2026-11-30", &yes, "2027-01-01", false}, // +32
		{"2026-11-30", &yes, "2026-11-30", false}, // equal
		{"2026-11-30", &yes, "2026-11-29", false}, // before
		{"2026-11-30", &yes, "2026-12-05T23:30:00-08:00", true},
		{"2026-11-30", &yes, "2026-12-31T23:59:59Z", true},
		{"2026-11-30", &yes, "2027-01-01T00:00:00Z", false},
		{"2026-11-30", &yes, "", false},
		{"2026-11-30", &yes, "soon", false},
		{"2026-11-30", nil, "2026-12-01", false},
		{"2026-11-30", &no, "2026-12-01", false},
		{"2026-11-29", &yes, "2026-12-01", false}, // not a month-end
		{"2027-02-28", &yes, "2027-03-02", true},  // not a leap year
		{"2028-02-28", &yes, "2028-03-02", false}, // leap year: the 29th ends it
		{"2028-02-29", &yes, "2028-03-02", true},
		{"2026-12-31", &yes, "2027-01-31", true},
		{"2026-12-31", &yes, "2027-02-01", false},
		{"2026-13-31", &yes, "2027-01-01", false},
	} {
		if got := IsClosingPeriod(tc.date, tc.closing, tc.collection); got != tc.want {
			c := "nil"
			if tc.closing != nil {
				c = map[bool]string{true: "true", false: "false"}[*tc.closing]
			}
			t.Errorf("IsClosingPeriod(%s, %s, %q) = %v, want %v", tc.date, c, tc.collection, got, tc.want)
		}
	}
}
