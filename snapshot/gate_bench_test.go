package snapshot

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/snapwriter/snapwriter/gate"
	"github.com/snapwriter/snapwriter/internal/benchutil"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/model"
)

// readCounter counts the documents a Firestore client reads: those its
// BatchGetDocuments and RunQuery streams return.
type readCounter struct{ docs atomic.Int64 }

func (c *readCounter) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	return countingStream{s, c}, err
}

type countingStream struct {
	grpc.ClientStream
	c *readCounter
}

func (s countingStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		switch r := m.(type) {
		case *firestorepb.BatchGetDocumentsResponse:
			if r.GetFound() != nil {
				s.c.docs.Add(1)
			}
		case *firestorepb.RunQueryResponse:
			if r.GetDocument() != nil {
				s.c.docs.Add(1)
			}
		}
	}
	return err
}

// benchCreds is the emulator's owner credential.
type benchCreds struct{}

func (benchCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer owner"}, nil
}
func (benchCreds) RequireTransportSecurity() bool { return false }

// BenchmarkGate measures what the publication gate costs a write, A/B in
// one process on one emulator: the same write with and without WithGate,
// alternated round by round, for a new date (the daily write: the count
// rule reads the newest complete snapshot before it) and for a rewrite of
// a stored complete date (the value rule reads every stored district and
// compares it with the input). BENCH_GATE_DISTRICTS sets the sizes
// (default 132,5000), BENCH_GATE_ROUNDS the rounds (default 3). It
// reports each variant's median write time, the gate's share of it, and
// the documents the gate read, and the gate's own time (its check run
// once more just before each gated write, on the same stored days) over
// the ungated write's: the whole writes' ratio varies with the emulator
// by more than a new date's gate costs. Each timed write starts from the same
// stored history (the project reset, the two days written again).
func BenchmarkGate(b *testing.B) {
	sizes, err := envInts("BENCH_GATE_DISTRICTS", "132,5000")
	if err != nil {
		b.Fatal(err)
	}
	rounds := benchutil.EnvInt("BENCH_GATE_ROUNDS", 3)
	ctx := context.Background()
	var table strings.Builder
	fmt.Fprintf(&table, "%-10s %-8s %12s %12s %8s %12s %12s %8s\n", "districts", "write", "ungated", "gated", "ratio", "gate alone", "gate/write", "reads")
	for _, n := range sizes {
		project := fmt.Sprintf("bench-gate-%d-%d", n, time.Now().UnixNano())
		var reads readCounter
		conn, err := grpc.NewClient(emu.Host, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithPerRPCCredentials(benchCreds{}), grpc.WithStreamInterceptor(reads.stream))
		if err != nil {
			b.Fatal(err)
		}
		client, err := firestore.NewClient(ctx, project, option.WithGRPCConn(conn), option.WithoutAuthentication())
		if err != nil {
			b.Fatal(err)
		}
		api := emu.TestAPIClient(b)
		locker, err := firestorelock.New(emu.TestClientFor(b, project))
		if err != nil {
			b.Fatal(err)
		}
		writer := func(gated bool) *Writer {
			// The default concurrency; a long TTL, so that a renewal the
			// loaded emulator answers late does not end a round partial.
			opts := []Option{WithAPIClient(api), WithLockTTL(2 * time.Minute)}
			if gated {
				opts = append(opts, WithGate(gate.Options{}))
			}
			w, err := NewWriter(client, locker, opts...)
			if err != nil {
				b.Fatal(err)
			}
			return w
		}
		plain, gated := writer(false), writer(true)
		write := func(w *Writer, id string, s *model.Snapshot) (time.Duration, int64) {
			reads.docs.Store(0)
			t0 := time.Now()
			res, err := w.Write(ctx, id, s)
			if err != nil || res.Outcome != OutcomeComplete {
				b.Fatalf("%s: %v", id, err)
			}
			return time.Since(t0), reads.docs.Load()
		}
		// Each timed write starts from the same stored history — the day
		// before and the day rewritten, nothing else — so that neither
		// variant writes into a bigger database than the other (the
		// emulator slows down as it fills).
		yesterday, rewrite := model.Generate("2026-11-19", n, 1), model.Generate("2026-11-20", n, 1)
		fresh := model.Generate("2026-11-21", n, 1)
		// alone is the gate's own time in each gated write: its check run
		// once more, on the same stored days, just before the write.
		var alone [2][]time.Duration // new date, rewrite
		timed := func(w *Writer, id string, s *model.Snapshot) (time.Duration, int64) {
			if err := emu.Reset(ctx, project); err != nil {
				b.Fatal(err)
			}
			write(plain, "2026-11-19", yesterday)
			write(plain, "2026-11-20", rewrite)
			if w == gated {
				t0 := time.Now()
				if rep, err := gated.checkGate(ctx, id, s); err != nil || rep == nil || rep.Held {
					b.Fatalf("%s: the gate: %v", id, err)
				}
				k := 0
				if id == "2026-11-20" {
					k = 1
				}
				alone[k] = append(alone[k], time.Since(t0))
			}
			return write(w, id, s)
		}
		type sample struct{ plain, gated []time.Duration }
		var newDate, again sample
		var freshReads, againReads [2]int64 // ungated, gated
		for r := range rounds {
			for _, g := range []bool{r%2 == 1, r%2 == 0} { // alternate which goes first
				w, k := plain, 0
				if g {
					w, k = gated, 1
				}
				d, rd := timed(w, "2026-11-21", fresh)
				freshReads[k] = rd
				d2, rd2 := timed(w, "2026-11-20", rewrite)
				againReads[k] = rd2
				if g {
					newDate.gated, again.gated = append(newDate.gated, d), append(again.gated, d2)
				} else {
					newDate.plain, again.plain = append(newDate.plain, d), append(again.plain, d2)
				}
			}
		}
		for i, v := range []struct {
			name  string
			s     sample
			reads [2]int64
		}{{"new date", newDate, freshReads}, {"rewrite", again, againReads}} {
			p, g, a := median(v.s.plain), median(v.s.gated), median(alone[i])
			ratio, share := float64(g)/float64(p), float64(a)/float64(p)
			fmt.Fprintf(&table, "%-10d %-8s %12s %12s %8.2f %12s %12.3f %8d\n", n, v.name, p.Round(time.Millisecond), g.Round(time.Millisecond), ratio,
				a.Round(time.Millisecond), share, v.reads[1]-v.reads[0])
			key := strings.ReplaceAll(v.name, " ", "-")
			b.ReportMetric(ratio, fmt.Sprintf("gated/ungated-%s-%d", key, n))
			b.ReportMetric(share, fmt.Sprintf("gate/ungated-%s-%d", key, n))
			b.ReportMetric(float64(v.reads[1]-v.reads[0]), fmt.Sprintf("gate-reads-%s-%d", key, n))
		}
		_ = client.Close()
	}
	b.ReportMetric(0, "ns/op")
	fmt.Fprint(os.Stderr, table.String())
}

// median is the median of ds (benchutil.Median's).
func median(ds []time.Duration) time.Duration {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(benchutil.Median(xs))
}
