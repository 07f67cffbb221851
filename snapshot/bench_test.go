package snapshot

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"golang.org/x/sync/errgroup"

	"github.com/snapwriter/snapwriter/internal/benchutil"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/model"
)

// contender writes the district documents of one snapshot under id.
type contender struct {
	name  string
	write func(ctx context.Context, id string, in input) error
}

// input is one snapshot and its district documents as stored.
type input struct {
	snap *model.Snapshot
	docs []map[string]any
}

func newInput(n int) input {
	snap := model.Generate(day, n, 1)
	docs := make([]map[string]any, n)
	for i, d := range snap.Payload.Districts {
		docs[i] = districtDoc(snap, d, d.Data, "")
	}
	return input{snap, docs}
}

// BenchmarkWriteThroughput measures docs/s of a whole snapshot write for 132
// and 5,000 realistic districts (2–20 KB each): snapwriter at its defaults
// and at concurrency 16, against the Firestore client's BulkWriter and
// against unfenced 50-op commits at the same concurrency. The contenders
// alternate within each round on one emulator, every round starts from an
// empty database, and the metrics are medians over the rounds
// (BENCH_ROUNDS; default 15 for 132 districts, 5 for 5,000). Ratios are reported beside the raw figures.
func BenchmarkWriteThroughput(b *testing.B) {
	for _, n := range []int{132, 5000} {
		b.Run(fmt.Sprintf("districts=%d", n), func(b *testing.B) {
			// A 132-district write takes a few hundred milliseconds, so
			// its medians need more rounds to settle than 5,000's.
			rounds := benchutil.EnvInt("BENCH_ROUNDS", map[int]int{132: 15, 5000: 5}[n])
			ctx := context.Background()
			project := fmt.Sprintf("bench-%d-%d", n, time.Now().UnixNano())
			client, err := emu.Client(ctx, project)
			if err != nil {
				b.Fatal(err)
			}
			defer client.Close()
			in := newInput(n)
			// The warm-up round writes at most 1,000 districts: enough to
			// warm the emulator's JIT, and the emulator keeps every version
			// it has stored in its heap even after a reset (see README).
			warm := in
			if n > 1000 {
				warm = newInput(1000)
			}
			locker, err := firestorelock.New(client)
			if err != nil {
				b.Fatal(err)
			}
			writer := func(conc int) func(ctx context.Context, id string, in input) error {
				w, err := NewWriter(client, locker, WithConcurrency(conc), WithLockWait(0))
				if err != nil {
					b.Fatal(err)
				}
				return func(ctx context.Context, id string, in input) error {
					res, err := w.Write(ctx, id, in.snap)
					if err == nil && !res.Complete {
						err = fmt.Errorf("incomplete write")
					}
					return err
				}
			}
			all := []contender{
				{"snapwriter-c3", writer(3)},
				{"unfenced-c3", unfenced(client, 3)},
				{"bulkwriter", bulk(client)},
				{"snapwriter-c16", writer(16)},
				{"unfenced-c16", unfenced(client, 16)},
			}
			samples := map[string][]float64{}
			// Round -1 warms the emulator's JIT and is not counted: a cold
			// emulator runs at half speed for the first few thousand docs.
			for i := 0; i < b.N; i++ {
				for r := -1; r < rounds; r++ {
					for k := range all {
						c := all[(k+max(r, 0))%len(all)] // rotate who goes first
						// Every write starts from an empty database: the
						// emulator keeps what it holds in one JVM heap, and a
						// round of 5,000-district snapshots left in place
						// would slow (then stall) whoever writes last.
						if err := emu.Reset(ctx, project); err != nil {
							b.Fatal(err)
						}
						id := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, (r+1)*len(all)+k).Format("2006-01-02")
						data := in
						if r < 0 {
							data = warm
						}
						t0 := time.Now()
						if err := c.write(ctx, id, data); err != nil {
							b.Fatalf("%s: %v", c.name, err)
						}
						rate := float64(len(data.docs)) / time.Since(t0).Seconds()
						if r < 0 {
							continue
						}
						b.Logf("round %d %s: %.0f docs/s", r, c.name, rate)
						samples[c.name] = append(samples[c.name], rate)
					}
				}
			}
			med := map[string]float64{}
			for name, s := range samples {
				med[name] = benchutil.Median(s)
				b.ReportMetric(med[name], name+"-docs/s")
			}
			b.ReportMetric(med["snapwriter-c3"]/med["bulkwriter"], "c3/bulkwriter")
			b.ReportMetric(med["snapwriter-c3"]/med["unfenced-c3"], "c3/unfenced-c3")
			b.ReportMetric(med["snapwriter-c16"]/med["unfenced-c16"], "c16/unfenced-c16")
			b.ReportMetric(0, "ns/op") // the per-op time of a multi-round loop means nothing
		})
	}
}

// unfenced commits the district documents in plain 50-write commits with
// conc in flight: the same chunks without the lock, the root or the fence.
func unfenced(client *firestore.Client, conc int) func(ctx context.Context, id string, in input) error {
	return func(ctx context.Context, id string, in input) error {
		coll := client.Collection(DefaultCollection).Doc(id).Collection("districts")
		g, ctx := errgroup.WithContext(ctx)
		g.SetLimit(conc)
		for chunk := range slices.Chunk(in.docs, DefaultBatchSize) {
			g.Go(func() error {
				//lint:ignore SA1019 the baseline is exactly the plain commits WriteBatch makes
				wb := client.Batch()
				for _, d := range chunk {
					wb.Set(coll.Doc(districtDocID(d["districtId"].(string))), d)
				}
				_, err := wb.Commit(ctx)
				return err
			})
		}
		return g.Wait()
	}
}

// bulk writes the district documents with the client's BulkWriter.
func bulk(client *firestore.Client) func(ctx context.Context, id string, in input) error {
	return func(ctx context.Context, id string, in input) error {
		coll := client.Collection(DefaultCollection).Doc(id).Collection("districts")
		bw := client.BulkWriter(ctx)
		jobs := make([]*firestore.BulkWriterJob, 0, len(in.docs))
		for _, d := range in.docs {
			j, err := bw.Set(coll.Doc(districtDocID(d["districtId"].(string))), d)
			if err != nil {
				return err
			}
			jobs = append(jobs, j)
		}
		bw.End()
		for _, j := range jobs {
			if _, err := j.Results(); err != nil {
				return err
			}
		}
		return nil
	}
}
