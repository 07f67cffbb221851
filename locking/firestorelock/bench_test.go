package firestorelock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/internal/benchutil"
	"github.com/snapwriter/snapwriter/locking"
)

// BenchmarkAcquireRelease measures lock acquire+release pairs per second
// from one goroutine on the emulator, on one key: this backend against a
// baseline that performs the spec's literal transactions with the Firestore
// client and nothing else (acquire: get the lock doc, get the counter doc,
// set both; release: query by lockId, delete) — no validation, no error
// mapping. The two contenders alternate within each round, and swap order
// every round, so drift in the emulator hits both alike. Metrics are
// medians over BENCH_ROUNDS rounds (default 5) of BENCH_PAIRS pairs
// (default 200):
//
//	go test -run '^$' -bench . -benchtime 1x ./locking/...
func BenchmarkAcquireRelease(b *testing.B) {
	rounds, pairs := benchutil.EnvInt("BENCH_ROUNDS", 5), benchutil.EnvInt("BENCH_PAIRS", 200)
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
	ours := func(key string) error {
		r, err := backend.Acquire(ctx, key, 30*time.Second)
		if err != nil || !r.OK {
			return fmt.Errorf("acquire: %v, %v", r.OK, err)
		}
		ok, err := backend.Release(ctx, r.LockID)
		if err != nil || !ok {
			return fmt.Errorf("release: %v, %v", ok, err)
		}
		return nil
	}
	contenders := []struct {
		name string
		pair func(key string) error
	}{{"ours", ours}, {"baseline", literal(client)}}
	// Warm up both (connections, the emulator's JIT) before measuring.
	for _, c := range contenders {
		for range 20 {
			if err := c.pair("bench:" + c.name); err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
		}
	}
	samples := map[string][]float64{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := range rounds {
			for j := range contenders {
				c := contenders[(j+r)%len(contenders)]
				t0 := time.Now()
				for range pairs {
					if err := c.pair("bench:" + c.name); err != nil {
						b.Fatalf("%s: %v", c.name, err)
					}
				}
				samples[c.name] = append(samples[c.name], float64(pairs)/time.Since(t0).Seconds())
			}
		}
	}
	o, l := benchutil.Median(samples["ours"]), benchutil.Median(samples["baseline"])
	b.ReportMetric(o, "ours-pairs/s")
	b.ReportMetric(l, "baseline-pairs/s")
	b.ReportMetric(o/l, "ratio")
	b.ReportMetric(0, "ns/op") // a whole run is one op; ns/op would mislead
}

// literal is the spec's acquire and release, transcribed onto the Go
// client, in collections of its own.
func literal(client *firestore.Client) func(key string) error {
	locks, fences := client.Collection("bench_locks"), client.Collection("bench_fences")
	errHeld := errors.New("held")
	return func(key string) error {
		ctx := context.Background()
		lockRef, fenceRef := locks.Doc(key), fences.Doc("fence:"+key)
		lockID, err := locking.NewLockID()
		if err != nil {
			return err
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
		if err != nil {
			return err
		}
		return client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
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
}
