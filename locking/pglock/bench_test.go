package pglock

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/snapwriter/snapwriter/internal/benchutil"
	"github.com/snapwriter/snapwriter/internal/faultproxy"
	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/pgserver"
)

// BenchmarkAcquireRelease measures lock acquire+release pairs on the
// PostgreSQL cluster (benchutil.AcquireRelease: serial pairs/s and p50/p99
// per operation, parallel-16 pairs/s, each as a ratio to the baseline):
// this backend (one round trip per operation: acquire a pipelined batch,
// release one statement) against specPeer, SyncGuard's multi-statement
// transactions sent one statement at a time (acquire: BEGIN, advisory
// lock, now(), SELECT … FOR UPDATE, fence INSERT, fence UPDATE, lock
// upsert, COMMIT; release: BEGIN, now(), SELECT … FOR UPDATE, DELETE,
// COMMIT). Both run on the same pool size and on tables of their own,
// once on loopback and once through a proxy adding BENCH_PG_RTT_US (default
// 2000 µs) to every round trip; each reports the median round trip of
// `SELECT 1` it measured (rtt-ms).
//
// `make bench` runs it on a durable cluster (fsync and synchronous_commit
// on), as production is; `go test -bench` alone runs on the tests'
// cluster, which commits without flushing.
//
//	go run ./pgserver/withpostgres --durable -- go test -run '^$' -bench AcquireRelease -benchtime 1x ./locking/pglock/
func BenchmarkAcquireRelease(b *testing.B) {
	b.Run("loopback", func(b *testing.B) { benchPairs(b, 0) })
	// A managed database is a millisecond or two away (Cloud SQL through
	// its connector, another zone); round trips, which this backend saves,
	// then dominate. The host's timer slack may add to it: the benchmark
	// reports the round trip it measured.
	rtt := time.Duration(benchutil.EnvInt("BENCH_PG_RTT_US", 2000)) * time.Microsecond
	b.Run(fmt.Sprintf("rtt-%s", rtt), func(b *testing.B) { benchPairs(b, rtt) })
}

// benchPairs runs the comparison on a pool that reaches the cluster
// through a proxy adding rtt to every round trip (directly for 0).
func benchPairs(b *testing.B, rtt time.Duration) {
	ctx := context.Background()
	pool := testPool(b, func(c *pgxpool.Config) {
		c.MaxConns = 32
		if rtt <= 0 {
			return
		}
		proxy, err := faultproxy.New(net.JoinHostPort(c.ConnConfig.Host, strconv.Itoa(int(c.ConnConfig.Port))))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(proxy.Close)
		proxy.SetLatency(rtt / 2)
		host, port, _ := net.SplitHostPort(proxy.Addr())
		p, _ := strconv.Atoi(port)
		c.ConnConfig.Host, c.ConnConfig.Port = host, uint16(p)
	})
	var rtts []time.Duration
	for range 20 {
		t0 := time.Now()
		if _, err := pool.Exec(ctx, `SELECT 1`); err != nil {
			b.Fatal(err)
		}
		rtts = append(rtts, time.Since(t0))
	}
	locks, fences := pgserver.Tables(b)
	be, err := New(ctx, pool, WithTables(locks, fences))
	if err != nil {
		b.Fatal(err)
	}
	peerLocks, peerFences := pgserver.Tables(b)
	if _, err := New(ctx, pool, WithTables(peerLocks, peerFences)); err != nil { // creates the peer's tables
		b.Fatal(err)
	}
	peer := specPeer{pool: pool, locks: peerLocks, fences: peerFences}

	pair := func(acquire func(string) (locking.AcquireResult, error), release func(string) (bool, error)) benchutil.Pair {
		return benchutil.Pair{
			Acquire: func(key string) (string, error) {
				r, err := acquire(key)
				if err != nil || !r.OK {
					return "", fmt.Errorf("acquire: %v, %v", r.OK, err)
				}
				return r.LockID, nil
			},
			Release: func(_, lockID string) error {
				ok, err := release(lockID)
				if err != nil || !ok {
					return fmt.Errorf("release: %v, %v", ok, err)
				}
				return nil
			},
		}
	}
	ttl := 30 * time.Second
	ours := benchutil.Contender{PairFor: func(int) (benchutil.Pair, error) {
		return pair(func(k string) (locking.AcquireResult, error) { return be.Acquire(ctx, k, ttl) },
			func(id string) (bool, error) { return be.Release(ctx, id) }), nil
	}}
	base := benchutil.Contender{PairFor: func(int) (benchutil.Pair, error) {
		return pair(func(k string) (locking.AcquireResult, error) { return peer.Acquire(ctx, k, ttl) },
			func(id string) (bool, error) { return peer.Release(ctx, id) }), nil
	}}
	benchutil.AcquireRelease(b, ours, base, false, benchutil.Metric{Value: benchutil.PercentileMs(rtts[1:], 50), Unit: "rtt-ms"})
}
