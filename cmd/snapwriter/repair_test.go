package main

import (
	"strings"
	"testing"
)

// repair takes the snapshot's date from the input, as write does: --date
// is needed only for an input without payload.metadata.dataAsOfDate, and
// must agree with it otherwise. Neither naming the date, or the two
// disagreeing, is exit 2 with nothing written.
func TestRepairDateFromInput(t *testing.T) {
	t.Parallel()
	in := genJSON(t, day, 4)
	undated := edit(t, in, func(m map[string]any) {
		delete(m["payload"].(map[string]any)["metadata"].(map[string]any), "dataAsOfDate")
	})
	for _, tc := range []struct {
		name  string
		input string
		args  []string
		code  int
		want  string // in stdout for exit 0, stderr otherwise
	}{
		{"date from the input", in, nil, exitOK, "snapshot " + day + ": complete"},
		{"--date agreeing", in, []string{"--date", day}, exitOK, "snapshot " + day + ": complete"},
		{"--date for an undated input", undated, []string{"--date", day}, exitOK, "snapshot " + day + ": complete"},
		{"dry run, date from the input", in, []string{"--dry-run"}, exitOK, day},
		{"--date disagreeing", in, []string{"--date", "2026-11-21"}, exitUsage, "--date is 2026-11-21 but the input's $.payload.metadata.dataAsOfDate is " + day},
		{"no date anywhere", undated, nil, exitUsage, "give the snapshot's date with --date"},
		{"bad --date", in, []string{"--date", "2026-11-31"}, exitUsage, `--date "2026-11-31": want a real YYYY-MM-DD date`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			code, out, errs := c.run(tc.input, append([]string{"repair", "--input", "-"}, tc.args...)...)
			got := errs
			if tc.code == exitOK {
				got = out
			}
			if code != tc.code || !strings.Contains(got, tc.want) {
				t.Fatalf("exit %d, want %d and %q\n%s%s", code, tc.code, tc.want, out, errs)
			}
			if n := c.docCount(); tc.code != exitOK && n != 0 {
				t.Errorf("%d documents written", n)
			}
		})
	}
}
