package main

import (
	"testing"

	"google.golang.org/grpc"
)

// get --district of a district a stored snapshot does not hold says so,
// with how many it has and how to list them; of a district whose write
// failed, that it failed; "snapshot not found" is kept for a snapshot
// that is not stored. Each exits 1.
func TestGetDistrictNotInSnapshot(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SNAPWRITER_MAX_RETRIES"] = "0"
	c.interceptors = []grpc.UnaryClientInterceptor{denyDistrict("7")}
	if code, out, errs := c.run(genJSON(t, day, 60), "write", "--input", "-"); code != exitPartial {
		t.Fatalf("write: exit %d, want 3\n%s%s", code, out, errs)
	}
	c.interceptors = nil
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "--date", day, "--district", "999"},
			"snapwriter: snapshot " + day + " has no district 999 (it has 60 districts: see `snapwriter get --date " + day + "`)\n"},
		{[]string{"get", "--date", day, "--district", "7"},
			"snapwriter: snapshot " + day + " has no district 7: its write failed (the snapshot is partial; `snapwriter repair --input FILE` writes it)\n"},
		{[]string{"get", "--date", "2026-11-21", "--district", "7"}, "snapwriter: 2026-11-21: snapshot not found\n"},
		{[]string{"get", "--date", "2026-11-21"}, "snapwriter: 2026-11-21: snapshot not found\n"},
	} {
		code, out, errs := c.run("", tc.args...)
		if code != exitError || errs != tc.want || out != "" {
			t.Errorf("%v: exit %d, want 1 and %q\nstdout %q\nstderr %q", tc.args, code, tc.want, out, errs)
		}
	}
}
