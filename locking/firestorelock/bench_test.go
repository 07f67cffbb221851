package firestorelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/internal/benchutil"
	"github.com/snapwriter/snapwriter/locking/backendkit"
)

// BenchmarkAcquireRelease measures lock acquire+release pairs on the
// emulator (benchutil.AcquireRelease: serial pairs/s and p50/p99 per
// operation, parallel-16 pairs/s, each as a ratio to the baseline): this
// backend (releasing as a Lease does, by key and lockId through
// ReleaseKey) against a baseline that performs SyncGuard's literal
// transactions with the Firestore client and nothing else (acquire: get the
// lock doc, get the counter doc, set both; release: query by lockId,
// delete) — no validation, no error mapping.
//
// In parallel-16 each goroutine has a lock and fence collection of its
// own: the emulator locks a whole collection for a query inside a
// transaction, so concurrent releases (a lockId query, then a delete) on
// one collection deadlock until its transaction lock timeout (~30 s; the
// locks expire meanwhile). Production Firestore locks only the index range
// the query reads, which for distinct lockIds is what separate collections
// model here. BENCH_PAR_SHARED=1 puts all 16 in one collection pair to see
// it.
//
//	go test -run '^$' -bench AcquireRelease -benchtime 1x ./locking/firestorelock/
func BenchmarkAcquireRelease(b *testing.B) {
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
	ours := benchutil.Contender{PairFor: func(w int) (benchutil.Pair, error) {
		be := backend
		if w >= 0 {
			var err error
			if be, err = New(client, WithCollections(fmt.Sprintf("bench_ours_locks_%d", w), fmt.Sprintf("bench_ours_fences_%d", w))); err != nil {
				return benchutil.Pair{}, err
			}
		}
		return benchutil.Pair{
			Acquire: func(key string) (string, error) {
				r, err := be.Acquire(ctx, key, 30*time.Second)
				if err != nil || !r.OK {
					return "", fmt.Errorf("acquire: %v, %v", r.OK, err)
				}
				return r.LockID, nil
			},
			// As a Lease releases: by key and lockId (the keyed shortcut
			// reads the lock document instead of querying by lockId).
			Release: func(key, lockID string) error {
				t0 := time.Now()
				ok, err := be.ReleaseKey(ctx, key, lockID)
				if err != nil || !ok {
					return fmt.Errorf("release: %v after %s, %v", ok, time.Since(t0), err)
				}
				return nil
			},
		}, nil
	}}
	base := benchutil.Contender{PairFor: func(w int) (benchutil.Pair, error) {
		if w < 0 {
			return literal(client, "bench_locks", "bench_fences"), nil
		}
		return literal(client, fmt.Sprintf("bench_locks_%d", w), fmt.Sprintf("bench_fences_%d", w)), nil
	}}
	benchutil.AcquireRelease(b, ours, base, os.Getenv("BENCH_PAR_SHARED") != "1")
}

// literal is SyncGuard's acquire and release, transcribed onto the Go
// client, in collections of its own.
func literal(client *firestore.Client, lockColl, fenceColl string) benchutil.Pair {
	locks, fences := client.Collection(lockColl), client.Collection(fenceColl)
	errHeld := errors.New("held")
	acquire := func(key string) (string, error) {
		ctx := context.Background()
		lockRef, fenceRef := locks.Doc(key), fences.Doc("fence:"+key)
		lockID, err := backendkit.NewLockID()
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
	return benchutil.Pair{Acquire: acquire, Release: release}
}
