package loadtest

import (
	"strings"
	"testing"
)

func TestLoadtestReportWriteText(t *testing.T) {
	rep := &Report{
		Collection: "scratch", SnapshotID: DefaultDate, Districts: 120, RoundsPerLevel: 2,
		Levels: []Level{
			{Concurrency: 3, Rounds: 1, DistrictsPerSecond: 600, WriteSeconds: 0.2, ChunkLatencyMs: Latency{P50: 10, P95: 20, P99: 30}, RootCommits: 2,
				WriteRate: Rate{MeasuredPerSec: 1090.9, ChunkSpanMs: 110, BusiestSecond: 120, LimitPerSec: 500, MinLimitPerSec: 250,
					WaitedMs: 3, WaitShare: 0.01, ResourceExhausted: 2, Aborted: 1, Slowdowns: 1}},
			{Concurrency: 16},
		},
		Rounds: []Round{{Concurrency: 3, Round: 1, Complete: true, DistrictsPerSecond: 600, DurationMs: 200,
			ChunkLatencyMs: Latency{P50: 10, P95: 20, P99: 30}, RootCommits: 2,
			WriteRate: Rate{MeasuredPerSec: 1090.9, ChunkSpanMs: 110, BusiestSecond: 120, LimitPerSec: 500, MinLimitPerSec: 250,
				WaitedMs: 3, WaitShare: 0.01, ResourceExhausted: 2, Aborted: 1, Slowdowns: 1}}},
		DocumentsDeleted: 124, LeftoversDeleted: 5, Interrupted: true,
	}
	var b strings.Builder
	if err := rep.WriteText(&b, 50, "postgres"); err != nil {
		t.Fatal(err)
	}
	const want = `loadtest: 120 districts per write into "scratch" (snapshot 2000-01-01), 2 rounds per concurrency, batch size 50, lock backend postgres

  concurrency  districts/s  write s  chunk p50 ms  p95 ms  p99 ms  aborted retries  other retries  root commits  lock wait ms  failed chunks  partial rounds
            3          600     0.20            10      20      30                0              0           2.0             0              0             0/1
           16            0     0.00             0       0       0                0              0           0.0             0              0             0/0

write rate against the budget, per concurrency (district writes a second; budget wait a mean per round):
  concurrency  measured/s  busiest 1 s  limit/s  lowest limit/s  budget wait ms  wait %  RESOURCE_EXHAUSTED  ABORTED  slowdowns
            3        1091          120      500             250               3       1                   2        1          1
           16           0            0        0               0               0       0                   0        0          0

rounds, in the order run:
  concurrency  round  districts/s  write s  chunk p50 ms  p95 ms  p99 ms  aborted retries  other retries  root commits  lock wait ms  failed chunks    result
            3      1          600     0.20            10      20      30                0              0             2             0              0  complete

write rate against the budget, per round:
  concurrency  round  chunks s  measured/s  busiest 1 s  limit/s  lowest limit/s  budget wait ms  wait %  RESOURCE_EXHAUSTED  ABORTED  slowdowns
            3      1      0.11        1091          120      500             250               3       1                   2        1          1

interrupted after 1 of 4 rounds

cleanup: deleted 124 documents written by this run and 5 an earlier run left

verdict: No round completed without push-back, so no rate was sustained: rerun with a lower
--concurrency, or --write-ramp=false and a lower --max-write-rate. 1 of 1 round met push-back: 2
RESOURCE_EXHAUSTED and 1 ABORTED answers to chunk commits; the budget fell to 250 district writes/s
at the lowest (concurrency 3, round 1).
`
	if got := b.String(); got != want {
		t.Errorf("WriteText wrote\n%s\nwant\n%s", got, want)
	}
}
