package backfill

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/outcome"
)

func TestTaskShard(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	cases := []struct {
		name         string
		index, count int
		env          map[string]string
		want         Shard
		err          string
	}{
		{"defaults", -1, -1, nil, Shard{0, 1}, ""},
		{"flags win over env", 1, 3, map[string]string{TaskIndexEnv: "0", TaskCountEnv: "9"}, Shard{1, 3}, ""},
		{"from env", -1, -1, map[string]string{TaskIndexEnv: "2", TaskCountEnv: "4"}, Shard{2, 4}, ""},
		{"empty env is unset", -1, -1, map[string]string{TaskIndexEnv: "", TaskCountEnv: ""}, Shard{0, 1}, ""},
		{"bad index env", -1, -1, map[string]string{TaskIndexEnv: "x"}, Shard{}, `CLOUD_RUN_TASK_INDEX="x": want a non-negative integer`},
		{"negative count env", -1, -1, map[string]string{TaskCountEnv: "-2"}, Shard{}, `CLOUD_RUN_TASK_COUNT="-2": want a non-negative integer`},
		{"index past count", 3, 3, nil, Shard{}, "task 3 of 3: want 0 <= index < count"},
		{"zero count", -1, 0, nil, Shard{}, "task 0 of 0: want 0 <= index < count"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := TaskShard(c.index, c.count, env(c.env))
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				var ee *EnvError
				if errors.As(err, &ee) == errors.Is(err, ErrShard) {
					t.Fatalf("err %v: want exactly one of *EnvError and ErrShard", err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("TaskShard = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestReport(t *testing.T) {
	var s Summary
	s.Add(DateResult{Date: "2026-01-01", Outcome: outcome.Complete, Fence: "7", DistrictsWritten: 3, Duration: 1500 * time.Millisecond})
	s.Add(DateResult{Date: "2026-01-02", Outcome: outcome.Partial, Fence: "8", DistrictsWritten: 2, FailedDistricts: []string{"9"}, Err: errors.New("1 failed")})
	s.Add(DateResult{Date: "2026-01-03", Outcome: outcome.Skipped, Fence: "5"})
	exit := func(r DateResult) int {
		if r.Outcome == outcome.Partial {
			return 3
		}
		return 0
	}
	rep := NewReport(&s, Shard{Index: 1, Count: 2}, exit)
	if rep.ExitCode != 3 || rep.Dates[1].ExitCode != 3 || rep.Dates[0].DurationMs != 1500 || rep.Dates[1].Error != "1 failed" {
		t.Fatalf("report = %+v", rep)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	const wantJSON = `{"taskIndex":1,"taskCount":2,"complete":1,"partial":1,"failed":0,"skipped":1,"notStarted":0,"notReady":0,"held":0,"exitCode":3,"dates":[` +
		`{"date":"2026-01-01","outcome":"complete","exitCode":0,"fence":"7","districtsWritten":3,"durationMs":1500},` +
		`{"date":"2026-01-02","outcome":"partial","exitCode":3,"fence":"8","districtsWritten":2,"failedDistricts":["9"],"durationMs":0,"error":"1 failed"},` +
		`{"date":"2026-01-03","outcome":"skipped","exitCode":0,"fence":"5","districtsWritten":0,"durationMs":0}]}`
	if string(b) != wantJSON {
		t.Errorf("JSON:\n got %s\nwant %s", b, wantJSON)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"DATE        OUTCOME   DISTRICTS  FAILED  FENCE  ERROR",
		"2026-01-01  complete  3          0       7      ",
		"2026-01-02  partial   2          1       8      1 failed",
		"2026-01-03  skipped   0          0       5      ",
		"task 1/2: 1 complete, 1 partial, 0 failed, 1 skipped, 0 not started",
		""}, "\n")
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
	if empty := NewReport(&Summary{}, Shard{0, 1}, exit); empty.ExitCode != 0 || empty.Dates == nil {
		t.Errorf("empty report = %+v: want exit 0 and an empty (not null) date list", empty)
	}
}
