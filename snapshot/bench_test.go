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

// contender writes n district documents of one snapshot under id.
type contender struct {
	name  string
	write func(ctx context.Context, id string) error
}

// BenchmarkWriteThroughput measures docs/s of a whole snapshot write for 132
// and 5,000 realistic districts (2–20 KB each): snapwriter at its defaults
// and at concurrency 16, against the Firestore client's BulkWriter and
// against unfenced 50-op commits at the same concurrency. The contenders
// alternate within each round on one emulator, every round starts from an
// empty database, and the metrics are medians over the rounds
// (BENCH_ROUNDS, default 5). Ratios are reported beside the raw figures.
func BenchmarkWriteThroughput(b *testing.B) {
	rounds := benchutil.EnvInt("BENCH_ROUNDS", 5)
	for _, n := range []int{132, 5000} {
		b.Run(fmt.Sprintf("districts=%d", n), func(b *testing.B) {
			ctx := context.Background()
			project := fmt.Sprintf("bench-%d-%d", n, time.Now().UnixNano())
			client, err := emu.Client(ctx, project)
			if err != nil {
				b.Fatal(err)
			}
			defer client.Close()
			snap := model.Generate(day, n, 1)
			docs := make([]map[string]any, n)
			for i, d := range snap.Payload.Districts {
				docs[i] = districtDoc(snap, d)
			}
			locker, err := firestorelock.New(client)
			if err != nil {
				b.Fatal(err)
			}
			writer := func(conc int) func(ctx context.Context, id string) error {
				w, err := NewWriter(client, locker, WithConcurrency(conc), WithLockWait(0))
				if err != nil {
					b.Fatal(err)
				}
				return func(ctx context.Context, id string) error {
					res, err := w.Write(ctx, id, snap)
					if err == nil && !res.Complete {
						err = fmt.Errorf("incomplete write")
					}
					return err
				}
			}
			all := []contender{
				{"snapwriter-c3", writer(3)},
				{"unfenced-c3", unfenced(client, docs, 3)},
				{"bulkwriter", bulk(client, docs)},
				{"snapwriter-c16", writer(16)},
				{"unfenced-c16", unfenced(client, docs, 16)},
			}
			samples := map[string][]float64{}
			for i := 0; i < b.N; i++ {
				for r := 0; r < rounds; r++ {
					if err := emu.Reset(ctx, project); err != nil {
						b.Fatal(err)
					}
					for k := range all {
						c := all[(k+r)%len(all)] // rotate who goes first
						id := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, r*len(all)+k).Format("2006-01-02")
						t0 := time.Now()
						if err := c.write(ctx, id); err != nil {
							b.Fatalf("%s: %v", c.name, err)
						}
						samples[c.name] = append(samples[c.name], float64(n)/time.Since(t0).Seconds())
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
func unfenced(client *firestore.Client, docs []map[string]any, conc int) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		coll := client.Collection(DefaultCollection).Doc(id).Collection("districts")
		g, ctx := errgroup.WithContext(ctx)
		g.SetLimit(conc)
		for chunk := range slices.Chunk(docs, DefaultBatchSize) {
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
func bulk(client *firestore.Client, docs []map[string]any) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		coll := client.Collection(DefaultCollection).Doc(id).Collection("districts")
		bw := client.BulkWriter(ctx)
		jobs := make([]*firestore.BulkWriterJob, 0, len(docs))
		for _, d := range docs {
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
