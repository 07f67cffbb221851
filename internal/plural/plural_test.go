package plural

import "testing"

func TestPlural(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ got, want string }{
		{N(0, "district"), "0 districts"},
		{N(1, "district"), "1 district"},
		{N(2, "problem"), "2 problems"},
		{Word(1, "entry", "entries"), "entry"},
		{Word(5, "entry", "entries"), "entries"},
		{Times(1), "once"},
		{Times(2), "2 times"},
		{Times(3), "3 times"},
		{Times(0), "0 times"},
	} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
}
