package firestorelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/internal/benchutil"
	"github.com/snapwriter/snapwriter/locking"
)

// BenchmarkAcquireRelease measures lock acquire+release pairs on the
// emulator: this backend (releasing as a Lease does, by key and lockId
// through ReleaseKey) against a baseline that performs the spec's
// literal transactions with the Firestore client and nothing else
// (acquire: get the lock doc, get the counter doc, set both; release: query
// by lockId, delete) — no validation, no error mapping. The two contenders
// alternate within each round, and swap order every round, so drift in the
// emulator hits both alike. Every metric is the median over BENCH_ROUNDS
// rounds (default 5) of that round's figure:
//
//   - serial: one goroutine, one key, BENCH_PAIRS pairs a round (default
//     200): pairs/s, and the p50 and p99 latency (ms) of acquire and of
//     release alone, for each contender;
//   - parallel-16: 16 goroutines, each on a key of its own, each doing
//     BENCH_PAR_PAIRS pairs a round (default 50): pairs/s over the wall
//     time of the round. Each goroutine also has a lock and fence
//     collection of its own: the emulator locks a whole collection for a
//     query inside a transaction, so concurrent releases (a lockId query,
//     then a delete) on one collection deadlock until its transaction lock
//     timeout (~30 s; the locks expire meanwhile). Production Firestore
//     locks only the index range the query reads, which for distinct
//     lockIds is what separate collections model here.
//     BENCH_PAR_SHARED=1 puts all 16 in one collection pair to see it.
//
// The ratio metrics are ours/baseline throughput (above 1: ours is
// faster). It is a benchmark, not a test: nothing is asserted on timings.
//
//	go test -run '^$' -bench AcquireRelease -benchtime 1x ./locking/firestorelock/
func BenchmarkAcquireRelease(b *testing.B) {
	rounds := benchutil.EnvInt("BENCH_ROUNDS", 5)
	ctx := context.Background()
	client, err := emu.Client(ctx, fmt.Sprintf("bench-lock-%d", time.Now().UnixNano()))
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	backend, err := New(client)
	if err != nil {
		b.Fatal(err)
	}
	// Serial rounds use one collection pair per contender; parallel rounds
	// one per worker (see the benchmark's comment).
	ours := contender{name: "ours", pairFor: func(w int) (pairFns, error) {
		be := backend
		if w >= 0 {
			var err error
			if be, err = New(client, WithCollections(fmt.Sprintf("bench_ours_locks_%d", w), fmt.Sprintf("bench_ours_fences_%d", w))); err != nil {
				return pairFns{}, err
			}
		}
		return pairFns{
			acquire: func(key string) (string, error) {
				r, err := be.Acquire(ctx, key, 30*time.Second)
				if err != nil || !r.OK {
					return "", fmt.Errorf("acquire: %v, %v", r.OK, err)
				}
				return r.LockID, nil
			},
			// As a Lease releases: by key and lockId (the keyed shortcut
			// reads the lock document instead of querying by lockId).
			release: func(key, lockID string) error {
				t0 := time.Now()
				ok, err := be.ReleaseKey(ctx, key, lockID)
				if err != nil || !ok {
					return fmt.Errorf("release: %v after %s, %v", ok, time.Since(t0), err)
				}
				return nil
			},
		}, nil
	}}
	base := contender{name: "baseline", pairFor: func(w int) (pairFns, error) {
		if w < 0 {
			return literal(client, "bench_locks", "bench_fences"), nil
		}
		return literal(client, fmt.Sprintf("bench_locks_%d", w), fmt.Sprintf("bench_fences_%d", w)), nil
	}}
	contenders := []contender{ours, base}

	b.Run("serial", func(b *testing.B) {
		pairs := benchutil.EnvInt("BENCH_PAIRS", 200)
		// Warm up both (connections, the emulator's JIT) before measuring.
		for _, c := range contenders {
			if _, err := c.round(1, 20, false); err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
		}
		rate := map[string][]float64{}
		lat := map[string][]float64{} // "<name>-<acquire|release>-p<50|99>-ms"
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for r := range rounds {
				for j := range contenders {
					c := contenders[(j+r)%len(contenders)]
					st, err := c.round(1, pairs, false)
					if err != nil {
						b.Fatalf("%s: %v", c.name, err)
					}
					rate[c.name] = append(rate[c.name], st.pairsPerSec)
					for op, ds := range map[string][]time.Duration{"acquire": st.acquire, "release": st.release} {
						for _, p := range []int{50, 99} {
							k := fmt.Sprintf("%s-%s-p%d-ms", c.name, op, p)
							lat[k] = append(lat[k], percentileMs(ds, p))
						}
					}
				}
			}
		}
		b.StopTimer()
		o, l := benchutil.Median(rate["ours"]), benchutil.Median(rate["baseline"])
		b.ReportMetric(o, "ours-pairs/s")
		b.ReportMetric(l, "baseline-pairs/s")
		b.ReportMetric(o/l, "ratio")
		for k, v := range lat {
			b.ReportMetric(benchutil.Median(v), k)
		}
		b.ReportMetric(0, "ns/op") // a whole run is one op; ns/op would mislead
	})

	b.Run("parallel-16", func(b *testing.B) {
		const workers = 16
		pairs := benchutil.EnvInt("BENCH_PAR_PAIRS", 50)
		shared := os.Getenv("BENCH_PAR_SHARED") == "1"
		for _, c := range contenders {
			if _, err := c.round(workers, 5, !shared); err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
		}
		rate := map[string][]float64{}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for r := range rounds {
				for j := range contenders {
					c := contenders[(j+r)%len(contenders)]
					st, err := c.round(workers, pairs, !shared)
					if err != nil {
						b.Fatalf("%s: %v", c.name, err)
					}
					rate[c.name] = append(rate[c.name], st.pairsPerSec)
				}
			}
		}
		b.StopTimer()
		o, l := benchutil.Median(rate["ours"]), benchutil.Median(rate["baseline"])
		b.ReportMetric(o, "ours-pairs/s")
		b.ReportMetric(l, "baseline-pairs/s")
		b.ReportMetric(o/l, "ratio")
		b.ReportMetric(0, "ns/op")
	})
}

// contender is one implementation under measurement. pairFor(w) returns
// the operations worker w uses: in collections of its own when w >= 0, in
// the contender's shared ones when w < 0.
type contender struct {
	name    string
	pairFor func(w int) (pairFns, error)
}

// pairFns are a contender's operations: acquire returns the lockId that
// release takes with the key.
type pairFns struct {
	acquire func(key string) (string, error)
	release func(key, lockID string) error
}

// roundStats is one round of one contender.
type roundStats struct {
	pairsPerSec      float64
	acquire, release []time.Duration // every operation's latency
}

// round runs pairs acquire+release pairs on each of workers goroutines,
// each on a key of its own ("bench:<name>:<worker>"), and times them. With
// ownCollections each worker also has collections of its own.
func (c contender) round(workers, pairs int, ownCollections bool) (roundStats, error) {
	fns := make([]pairFns, workers)
	for w := range workers {
		i := -1
		if ownCollections {
			i = w
		}
		var err error
		if fns[w], err = c.pairFor(i); err != nil {
			return roundStats{}, err
		}
	}
	acq := make([][]time.Duration, workers)
	rel := make([][]time.Duration, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("bench:%s:%d", c.name, w)
			acq[w], rel[w] = make([]time.Duration, 0, pairs), make([]time.Duration, 0, pairs)
			for range pairs {
				t1 := time.Now()
				id, err := fns[w].acquire(key)
				t2 := time.Now()
				if err == nil {
					err = fns[w].release(key, id)
				}
				if err != nil {
					errs[w] = err
					return
				}
				acq[w] = append(acq[w], t2.Sub(t1))
				rel[w] = append(rel[w], time.Since(t2))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return roundStats{}, err
	}
	st := roundStats{pairsPerSec: float64(workers*pairs) / elapsed.Seconds()}
	for w := range workers {
		st.acquire = append(st.acquire, acq[w]...)
		st.release = append(st.release, rel[w]...)
	}
	return st, nil
}

// percentileMs is the p-th percentile of ds (nearest rank), in ms.
func percentileMs(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return float64(s[max(i, 0)]) / float64(time.Millisecond)
}

// literal is the spec's acquire and release, transcribed onto the Go
// client, in collections of its own.
func literal(client *firestore.Client, lockColl, fenceColl string) pairFns {
	locks, fences := client.Collection(lockColl), client.Collection(fenceColl)
	errHeld := errors.New("held")
	acquire := func(key string) (string, error) {
		ctx := context.Background()
		lockRef, fenceRef := locks.Doc(key), fences.Doc("fence:"+key)
		lockID, err := locking.NewLockID()
		if err != nil {
			return "", err
		}
		err = client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			ls, err := tx.Get(lockRef)
			if err != nil && status.Code(err) != codes.NotFound {
				return err
			}
			fs, err := tx.Get(fenceRef)
			if err != nil && status.Code(err) != codes.NotFound {
				return err
			}
			now := time.Now().UnixMilli()
			if ls.Exists() && ls.Data()["expiresAtMs"].(int64) > now-1000 {
				return errHeld
			}
			n := uint64(0)
			if fs.Exists() {
				n, _ = strconv.ParseUint(fs.Data()["fence"].(string), 10, 64)
			}
			fence := fmt.Sprintf("%015d", n+1)
			if err := tx.Set(lockRef, map[string]any{"lockId": lockID, "expiresAtMs": now + 30000,
				"acquiredAtMs": now, "key": key, "fence": fence}); err != nil {
				return err
			}
			return tx.Set(fenceRef, map[string]any{"fence": fence, "keyDebug": key})
		})
		return lockID, err
	}
	release := func(_, lockID string) error {
		return client.RunTransaction(context.Background(), func(ctx context.Context, tx *firestore.Transaction) error {
			docs, err := tx.Documents(locks.Where("lockId", "==", lockID)).GetAll()
			if err != nil {
				return err
			}
			if len(docs) != 1 || docs[0].Data()["lockId"] != lockID || docs[0].Data()["expiresAtMs"].(int64) <= time.Now().UnixMilli()-1000 {
				return errors.New("not released")
			}
			return tx.Delete(docs[0].Ref)
		})
	}
	return pairFns{acquire: acquire, release: release}
}
