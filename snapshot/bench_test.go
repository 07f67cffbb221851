package snapshot

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"cloud.google.com/go/firestore"
	vkit "cloud.google.com/go/firestore/apiv1"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/internal/benchutil"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// contender writes the district documents of one snapshot under id.
type contender struct {
	name  string
	write func(ctx context.Context, id string, in input) error
}

// contenderNames is every contender, in the tables' order.
var contenderNames = []string{"snapwriter-c3", "snapwriter-c16", "unfenced-c3", "unfenced-c16", "bulkwriter", "seed"}

// input is one snapshot and its district documents as stored.
type input struct {
	snap *model.Snapshot
	docs []map[string]any
	// seedDocs are docs as the application's writer stores them: without
	// snapwriter's writerFence.
	seedDocs []map[string]any
}

func newInput(n int) input {
	snap := model.Generate(day, n, 1)
	in := input{snap: snap, docs: make([]map[string]any, n), seedDocs: make([]map[string]any, n)}
	for i, d := range snap.Payload.Districts {
		in.docs[i] = layout.DistrictDoc(snap, d, memData(d), "")
		in.seedDocs[i] = maps.Clone(in.docs[i])
		delete(in.seedDocs[i], "writerFence")
	}
	return in
}

// groupResult is one (districts, round trip) group's medians.
type groupResult struct {
	districts int
	rtt       time.Duration // added by the proxy (0: no proxy)
	readMs    float64       // measured p50 of a one-document read, ms
	rounds    int
	rate      map[string]float64   // docs/s
	cpu       map[string]float64   // client CPU-seconds per 1,000 districts
	samples   map[string][]float64 // every successful round's docs/s
	failed    map[string]int       // rounds whose write failed
	// rootCommits and rootKB: commits that wrote the snapshot's root
	// document, and the kilobytes of those writes, per snapshot (medians):
	// what production charges for and the emulator does not (Firestore
	// serialises commits to one document and rewrites it whole).
	rootCommits map[string]float64
	rootKB      map[string]float64
}

// rssResult is one run of the built binary's `write`.
type rssResult struct {
	districts  int
	inputBytes int64
	exit       int
	peakRSS    int64 // bytes
	elapsed    time.Duration
}

// BenchmarkWriteThroughput measures a whole snapshot write's docs/s and the
// client's CPU per 1,000 districts for six contenders: snapwriter at its
// defaults (c3) and at concurrency 16, unfenced 50-op commits at 3 and 16
// in flight, the Firestore client's BulkWriter, and the seed design (the
// application's chunked writer: root and first 49 districts in one batch,
// then waves of three 50-op batches, no lock, no fence). It runs one group
// per district count (BENCH_DISTRICTS, default 132,5000) and added round
// trip (BENCH_RTTS in ms, default 0,2,10), each on fresh emulators reached
// through a delay proxy run as a separate process (none for 0), so every
// byte of every contender (the lock's included) pays the round trip and
// the proxy's CPU is not the client's. Within a group the contenders
// alternate (who goes first rotates each round), every write starts from
// an empty database, and each figure is the median over BENCH_ROUNDS
// rounds (default 7 for up to 1,000 districts, else 3). Then it runs the
// built `snapwriter write` on BENCH_RSS_DISTRICTS generated districts
// (default 5000,20000; "none" skips it) and records its peak RSS against
// the input's size. It prints one table of everything at the end.
func BenchmarkWriteThroughput(b *testing.B) {
	rtts, err := envDurations("BENCH_RTTS", "0,2,10")
	if err != nil {
		b.Fatal(err)
	}
	districts, err := envInts("BENCH_DISTRICTS", "132,5000")
	if err != nil {
		b.Fatal(err)
	}
	rssDistricts, err := envInts("BENCH_RSS_DISTRICTS", "5000,20000")
	if err != nil {
		b.Fatal(err)
	}
	tools := b.TempDir()
	var proxyBin string
	if slices.ContainsFunc(rtts, func(d time.Duration) bool { return d > 0 }) {
		proxyBin = benchutil.GoBuild(b, tools, "github.com/snapwriter/snapwriter/internal/benchutil/delayproxy")
	}
	start := time.Now()
	var groups []groupResult
	for _, n := range districts {
		in := newInput(n)
		warm := newInput(500)
		for _, rtt := range rtts {
			b.Run(fmt.Sprintf("districts=%d/rtt=%s", n, fmtMs(rtt)), func(b *testing.B) {
				groups = append(groups, runGroup(b, proxyBin, in, warm, rtt))
			})
		}
	}
	var rss []rssResult
	if len(rssDistricts) > 0 {
		b.Run("rss", func(b *testing.B) { rss = runRSS(b, tools, rssDistricts) })
	}
	printTables(os.Stdout, groups, rss, time.Since(start))
}

// runGroup runs every contender on in through a proxy adding rtt. The
// emulator keeps every version it stores in its heap, reset or not (about
// 0.1 GB per 1,000 of these documents), so the group starts a fresh one,
// and again before any round that would take it past BENCH_EMU_DOCS
// documents (default 40,000: a round of 5,000 districts and its warm-up),
// each time with an uncounted warm-up round: a cold emulator runs at half
// speed for the first few thousand documents.
func runGroup(b *testing.B, proxyBin string, in, warm input, rtt time.Duration) groupResult {
	n := len(in.docs)
	// A write of a few hundred districts takes well under a second, so
	// its medians need more rounds to settle.
	defRounds := 3
	if n <= 1000 {
		defRounds = 7
	}
	rounds := benchutil.EnvInt("BENCH_ROUNDS", defRounds)
	budget := benchutil.EnvInt("BENCH_EMU_DOCS", 40000)
	ctx := context.Background()
	rates, cpus := map[string][]float64{}, map[string][]float64{}
	roots, rootKB := map[string][]float64{}, map[string][]float64{}
	failed := map[string]int{}
	var reads []float64
	var srv *server
	defer func() {
		if srv != nil {
			srv.close()
		}
	}()
	written := 0 // documents on srv's emulator
	for i := 0; i < b.N; i++ {
		for r := range rounds {
			roundDocs := len(contenderNames) * n
			if srv == nil || written+roundDocs > budget {
				if srv != nil {
					srv.close()
				}
				var err error
				if srv, err = startServer(ctx, b, proxyBin, rtt); err != nil {
					b.Fatal(err)
				}
				for k, c := range srv.all {
					srv.reset(ctx)
					if err := c.write(ctx, time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, k).Format("2006-01-02"), warm); err != nil {
						b.Fatalf("warm-up %s: %v", c.name, err)
					}
				}
				written = len(srv.all) * len(warm.docs)
				// Measured warm, as the writes will find the server.
				ms, err := readRoundTrip(ctx, srv.client)
				if err != nil {
					b.Fatal(err)
				}
				reads = append(reads, ms)
			}
			for k := range srv.all {
				c := srv.all[(k+r)%len(srv.all)] // rotate who goes first
				id := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, r*len(srv.all)+k).Format("2006-01-02")
				srv.reset(ctx)
				// The previous write's garbage is not this one's cost.
				runtime.GC()
				cpu0, t0 := cpuTime(), time.Now()
				err := c.write(ctx, id, in)
				elapsed, cpu := time.Since(t0), cpuTime()-cpu0
				written += n
				if err != nil {
					// Reported, and the round goes on: one failed write
					// must not cost the figures of the rest.
					b.Errorf("round %d %s: %v", r, c.name, err)
					failed[c.name]++
					continue
				}
				commits, bytes := srv.tap.take(id)
				roots[c.name] = append(roots[c.name], float64(commits))
				rootKB[c.name] = append(rootKB[c.name], float64(bytes)/1e3)
				rate := float64(n) / elapsed.Seconds()
				perK := cpu.Seconds() / float64(n) * 1000
				b.Logf("round %d %s: %.0f docs/s, %.3f CPU-s per 1,000 districts, %d root commits (%.0f kB) in %s",
					r, c.name, rate, perK, commits, float64(bytes)/1e3, elapsed.Round(time.Millisecond))
				rates[c.name] = append(rates[c.name], rate)
				cpus[c.name] = append(cpus[c.name], perK)
			}
		}
	}
	g := groupResult{districts: n, rtt: rtt, readMs: benchutil.Median(reads), rounds: rounds,
		rate: map[string]float64{}, cpu: map[string]float64{}, samples: rates, failed: failed,
		rootCommits: map[string]float64{}, rootKB: map[string]float64{}}
	for _, name := range contenderNames {
		g.rate[name] = benchutil.Median(rates[name])
		g.cpu[name] = benchutil.Median(cpus[name])
		g.rootCommits[name] = benchutil.Median(roots[name])
		g.rootKB[name] = benchutil.Median(rootKB[name])
		b.ReportMetric(g.rate[name], name+"-docs/s")
		b.ReportMetric(g.cpu[name], name+"-cpu-s/1k")
	}
	for _, r := range ratios {
		b.ReportMetric(g.ratio(r), r.label)
	}
	b.ReportMetric(g.readMs, "read-p50-ms")
	b.ReportMetric(0, "ns/op") // the per-op time of a multi-round loop means nothing
	return g
}

// server is a fresh emulator, the delay proxy in front of it (none for a
// round trip of 0), and the contenders on one client through the proxy:
// the lock's backend uses that client too, so all of a contender's
// traffic pays the round trip.
type server struct {
	b         *testing.B
	emu       *emulator.Emulator
	stopProxy func()
	project   string
	client    *firestore.Client
	api       *vkit.Client
	all       []contender
	tap       *rootTap
}

func startServer(ctx context.Context, b *testing.B, proxyBin string, rtt time.Duration) (*server, error) {
	emu, err := emulator.Start(ctx, emulator.WithoutReuse())
	if err != nil {
		return nil, err
	}
	s := &server{b: b, emu: emu, stopProxy: func() {}, project: fmt.Sprintf("bench-%d", time.Now().UnixNano())}
	via := emu
	if rtt > 0 {
		var addr string
		if addr, s.stopProxy, err = startProxy(proxyBin, emu.Host, rtt); err != nil {
			s.close()
			return nil, err
		}
		via = &emulator.Emulator{Host: addr}
	}
	s.tap = &rootTap{byID: map[string][2]int{}}
	if s.client, err = via.Client(ctx, s.project, s.tap.interceptor); err != nil {
		s.close()
		return nil, err
	}
	// The chunks' API client goes through the proxy (and the tap) too.
	if s.api, err = via.APIClient(ctx, s.tap.interceptor); err != nil {
		s.close()
		return nil, err
	}
	// As the command's lock: its transactions on the API client, begun
	// by their reads (firestorelock.WithAPIClient).
	locker, err := firestorelock.New(s.client, firestorelock.WithAPIClient(s.api))
	if err != nil {
		s.close()
		return nil, err
	}
	writer := func(conc int) func(ctx context.Context, id string, in input) error {
		w, err := NewWriter(s.client, locker, WithAPIClient(s.api), WithConcurrency(conc), WithLockWait(0))
		if err != nil {
			b.Fatal(err)
		}
		return func(ctx context.Context, id string, in input) error {
			res, err := w.Write(ctx, id, in.snap)
			if err == nil && res.Outcome != OutcomeComplete {
				err = errors.New("incomplete write")
			}
			return err
		}
	}
	s.all = []contender{
		{"snapwriter-c3", writer(3)},
		{"unfenced-c3", unfenced(s.client, 3)},
		{"bulkwriter", bulk(s.client)},
		{"seed", seed(s.client)},
		{"snapwriter-c16", writer(16)},
		{"unfenced-c16", unfenced(s.client, 16)},
	}
	return s, nil
}

// reset empties the database before each write: the emulator keeps what
// it holds in one JVM heap, and snapshots left in place would slow
// whoever writes last.
func (s *server) reset(ctx context.Context) {
	if err := s.emu.Reset(ctx, s.project); err != nil {
		s.b.Fatal(err)
	}
}

func (s *server) close() {
	if s.client != nil {
		_ = s.client.Close()
	}
	if s.api != nil {
		_ = s.api.Close()
	}
	s.stopProxy()
	_ = s.emu.Stop()
}

// ratio is one throughput ratio the targets name.
type ratio struct{ label, num, den string }

var ratios = []ratio{
	{"c3/seed", "snapwriter-c3", "seed"},
	{"c16/unfenced-c16", "snapwriter-c16", "unfenced-c16"},
	{"c3/unfenced-c3", "snapwriter-c3", "unfenced-c3"},
}

func (g groupResult) ratio(r ratio) float64 {
	if g.rate[r.den] == 0 {
		return 0
	}
	return g.rate[r.num] / g.rate[r.den]
}

// readRoundTrip is the median time of reading one small document, in ms:
// the round trip a contender's requests actually pay, proxy and timers
// included.
func readRoundTrip(ctx context.Context, client *firestore.Client) (float64, error) {
	doc := client.Collection("bench").Doc("rtt")
	if _, err := doc.Set(ctx, map[string]any{"x": 1}); err != nil {
		return 0, err
	}
	var ds []time.Duration
	for i := range 21 {
		t0 := time.Now()
		if _, err := doc.Get(ctx); err != nil {
			return 0, err
		}
		if i > 0 { // the first may open a stream
			ds = append(ds, time.Since(t0))
		}
	}
	return benchutil.PercentileMs(ds, 50), nil
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
					wb.Set(coll.Doc(layout.DistrictDocID(d["districtId"].(string))), d)
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
			j, err := bw.Set(coll.Doc(layout.DistrictDocID(d["districtId"].(string))), d)
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

// Batch size and batches in flight of the seed design's writer.
const (
	seedBatchSize   = 50
	seedConcurrency = 3
)

// seed is the design snapwriter replaces, the application's chunked
// writer, as plainly as it reads: batch 0 holds the root document and the
// first 49 districts and commits before any other batch starts; the other
// districts go in 50-write batches, three at a time, each group of three
// waiting for its slowest batch before the next starts. No lock, no fence,
// no second root write: in a fault-free run the root is written once,
// complete. Its retries never run here.
func seed(client *firestore.Client) func(ctx context.Context, id string, in input) error {
	return func(ctx context.Context, id string, in input) error {
		rootRef := client.Collection(DefaultCollection).Doc(id)
		coll := rootRef.Collection("districts")
		commit := func(ctx context.Context, root map[string]any, docs []map[string]any) error {
			//lint:ignore SA1019 the seed design commits plain write batches
			wb := client.Batch()
			if root != nil {
				wb.Set(rootRef, root)
			}
			for _, d := range docs {
				wb.Set(coll.Doc(layout.DistrictDocID(d["districtId"].(string))), d)
			}
			_, err := wb.Commit(ctx)
			return err
		}
		first := min(seedBatchSize-1, len(in.seedDocs))
		if err := commit(ctx, seedRoot(id, in), in.seedDocs[:first]); err != nil {
			return fmt.Errorf("batch 0: %w", err)
		}
		batches := slices.Collect(slices.Chunk(in.seedDocs[first:], seedBatchSize))
		for wave := range slices.Chunk(batches, seedConcurrency) {
			var g errgroup.Group
			for _, docs := range wave {
				g.Go(func() error { return commit(ctx, nil, docs) })
			}
			if err := g.Wait(); err != nil {
				return err
			}
		}
		return nil
	}
}

// seedRoot is the application's root document for a complete write:
// metadata (PerDistrictSnapshotMetadata with writeComplete and
// writeFailedDistricts), manifest (SnapshotManifest, one entry per
// district) and the rankings verbatim.
func seedRoot(id string, in input) map[string]any {
	s, md := in.snap, in.snap.Payload.Metadata
	ids := make([]string, len(s.Payload.Districts))
	entries := make([]map[string]any, len(s.Payload.Districts))
	for i, d := range s.Payload.Districts {
		ids[i] = d.DistrictID
		entries[i] = map[string]any{
			"districtId":   d.DistrictID,
			"fileName":     layout.DistrictDocID(d.DistrictID),
			"status":       "success",
			"fileSize":     int64(model.FirestoreSize(memData(d))),
			"lastModified": s.CreatedAt,
		}
	}
	root := map[string]any{
		"metadata": map[string]any{
			"snapshotId":           id,
			"createdAt":            s.CreatedAt,
			"schemaVersion":        s.SchemaVersion,
			"calculationVersion":   s.CalculationVersion,
			"status":               s.Status,
			"configuredDistricts":  md.ConfiguredDistricts,
			"successfulDistricts":  ids,
			"failedDistricts":      md.FailedDistricts,
			"errors":               s.Errors,
			"processingDuration":   md.ProcessingDurationMs,
			"source":               md.Source,
			"dataAsOfDate":         md.DataAsOfDate,
			"writeComplete":        true,
			"writeFailedDistricts": []string{},
		},
		"manifest": map[string]any{
			"snapshotId":          id,
			"createdAt":           s.CreatedAt,
			"districts":           entries,
			"totalDistricts":      len(entries),
			"successfulDistricts": len(entries),
			"failedDistricts":     0,
			"allDistrictsRankings": map[string]any{
				"filename": "all-districts-rankings.json",
				"size":     model.FirestoreSize(s.Rankings),
				"status":   map[bool]string{true: "present", false: "missing"}[s.Rankings != nil],
			},
		},
	}
	if s.Rankings != nil {
		root["rankings"] = s.Rankings
	}
	return root
}

// runRSS generates each district count's input with the built binary,
// writes it with `snapwriter write` on an emulator of its own, and records
// the write's exit code and peak RSS. A refused write (exit 2) is a result,
// not a failure of the benchmark.
func runRSS(b *testing.B, tools string, districts []int) []rssResult {
	bin := benchutil.GoBuild(b, tools, "github.com/snapwriter/snapwriter/cmd/snapwriter")
	// The write runs under maxrss, which reports its peak RSS: read here,
	// a child's would include this process's own (see maxrss).
	maxrss := benchutil.GoBuild(b, tools, "github.com/snapwriter/snapwriter/internal/benchutil/maxrss")
	ctx := context.Background()
	emu, err := emulator.Start(ctx, emulator.WithoutReuse())
	if err != nil {
		b.Fatal(err)
	}
	defer emu.Stop()
	var out []rssResult
	for i, n := range districts {
		date := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i).Format("2006-01-02")
		path := filepath.Join(b.TempDir(), fmt.Sprintf("%d.json", n))
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		gen := exec.Command(bin, "generate", "--date", date, "--districts", strconv.Itoa(n))
		gen.Stdout, gen.Stderr = f, os.Stderr
		err = gen.Run()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			b.Fatalf("generate %d districts: %v", n, err)
		}
		st, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		var stderr tail
		w := exec.Command(maxrss, bin, "write", "--input", path, "--project", fmt.Sprintf("bench-rss-%d", n), "--log-level", "warn")
		w.Env = append(os.Environ(), emulator.HostEnv+"="+emu.Host)
		w.Stdout, w.Stderr = io.Discard, &stderr
		t0 := time.Now()
		err = w.Run()
		r := rssResult{districts: n, inputBytes: st.Size(), elapsed: time.Since(t0)}
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			b.Fatalf("write %d districts: %v", n, err)
		}
		r.exit = w.ProcessState.ExitCode()
		i := strings.LastIndex(stderr.String(), "maxrss ")
		if i < 0 {
			b.Fatalf("write %d districts: maxrss reported nothing: %s", n, stderr.String())
		}
		var kb int64
		if _, err := fmt.Sscanf(stderr.String()[i:], "maxrss %d", &kb); err != nil {
			b.Fatalf("write %d districts: %v", n, err)
		}
		r.peakRSS = kb * 1024
		if r.exit != 0 {
			b.Logf("write %d districts: exit %d: %s", n, r.exit, strings.TrimSpace(stderr.String()))
		}
		b.ReportMetric(float64(r.peakRSS)/(1<<20), fmt.Sprintf("rss-%d-MiB", n))
		b.ReportMetric(float64(r.peakRSS)/float64(r.inputBytes), fmt.Sprintf("rss/input-%d", n))
		b.ReportMetric(float64(r.exit), fmt.Sprintf("exit-%d", n))
		out = append(out, r)
		_ = os.Remove(path) // hundreds of MB at 20,000 districts
	}
	b.ReportMetric(0, "ns/op")
	return out
}

// tail keeps the last 2 KB written to it.
type tail struct{ bytes.Buffer }

func (t *tail) Write(p []byte) (int, error) {
	n, err := t.Buffer.Write(p)
	if t.Len() > 4096 {
		t.Next(t.Len() - 2048)
	}
	return n, err
}

// startProxy runs the delay proxy in front of target and returns its
// address and what stops it.
func startProxy(bin, target string, rtt time.Duration) (string, func(), error) {
	cmd := exec.Command(bin, "-target", target, "-rtt", rtt.String())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		_ = stdin.Close() // the proxy exits when its stdin closes
		_ = cmd.Wait()
	}
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("delay proxy: %w", err)
	}
	return strings.TrimSpace(addr), stop, nil
}

// envInts reads a comma-separated list of positive integers from the
// environment (def when unset); "none" is the empty list.
func envInts(name, def string) ([]int, error) {
	v := cmp.Or(os.Getenv(name), def)
	if v == "none" {
		return nil, nil
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s: %q is not a positive integer", name, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// envDurations reads a comma-separated list of round trips from the
// environment (def when unset): milliseconds, or Go durations ("500us").
func envDurations(name, def string) ([]time.Duration, error) {
	var out []time.Duration
	for f := range strings.SplitSeq(cmp.Or(os.Getenv(name), def), ",") {
		f = strings.TrimSpace(f)
		if ms, err := strconv.ParseFloat(f, 64); err == nil && ms >= 0 {
			out = append(out, time.Duration(ms*float64(time.Millisecond)))
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%s: %q is not a round trip (ms or a duration)", name, f)
		}
		out = append(out, d)
	}
	return out, nil
}

// printTables writes the benchmark's summary: docs/s and ratios per group,
// CPU per 1,000 districts per group, and the binary's peak RSS.
func printTables(w io.Writer, groups []groupResult, rss []rssResult, took time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := func(first ...string) {
		fmt.Fprintln(tw, strings.Join(first, "\t")+"\t"+strings.Join(contenderNames, "\t")+"\t")
	}
	label := func(g groupResult) string {
		return fmt.Sprintf("%d\t%s\t%.2f\t%d", g.districts, fmtMs(g.rtt), g.readMs, g.rounds)
	}
	fmt.Fprintf(w, "\n=== snapshot write benchmark (%s) ===\n", took.Round(time.Second))
	fmt.Fprintln(w, "\ndocs/s (medians; rtt: added round trip; read p50: measured one-document read, ms)")
	var ratioHead []string
	for _, r := range ratios {
		ratioHead = append(ratioHead, r.label)
	}
	fmt.Fprintln(tw, "districts\trtt\tread p50\trounds\t"+strings.Join(contenderNames, "\t")+"\t"+strings.Join(ratioHead, "\t")+"\t")
	for _, g := range groups {
		row := []string{label(g)}
		for _, name := range contenderNames {
			row = append(row, fmt.Sprintf("%.0f", g.rate[name]))
		}
		for _, r := range ratios {
			row = append(row, fmt.Sprintf("%.2f", g.ratio(r)))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nclient CPU-seconds per 1,000 districts (user+sys of the benchmark process, medians)")
	head("districts", "rtt", "read p50", "rounds")
	for _, g := range groups {
		row := []string{label(g)}
		for _, name := range contenderNames {
			row = append(row, fmt.Sprintf("%.3f", g.cpu[name]))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nroot commits per snapshot, and kB of root written (medians; commits whose writes name the root document)")
	head("districts", "rtt", "read p50", "rounds")
	for _, g := range groups {
		row := []string{label(g)}
		for _, name := range contenderNames {
			row = append(row, fmt.Sprintf("%.0f (%.0f kB)", g.rootCommits[name], g.rootKB[name]))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	_ = tw.Flush()
	// The spread says how far to trust a median on a loaded machine.
	fmt.Fprintln(w, "\ndocs/s of every round, in round order (failed writes are left out of the medians)")
	head("districts", "rtt")
	for _, g := range groups {
		row := []string{fmt.Sprintf("%d\t%s", g.districts, fmtMs(g.rtt))}
		for _, name := range contenderNames {
			var xs []string
			for _, x := range g.samples[name] {
				xs = append(xs, fmt.Sprintf("%.0f", x))
			}
			if f := g.failed[name]; f > 0 {
				xs = append(xs, fmt.Sprintf("(%d failed)", f))
			}
			row = append(row, strings.Join(xs, " "))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	_ = tw.Flush()
	if len(rss) > 0 {
		fmt.Fprintln(w, "\npeak RSS of `snapwriter write` (the built binary, one run each)")
		fmt.Fprintln(tw, "districts\tinput MB\texit\tpeak RSS MB\tRSS/input\ttook\t")
		for _, r := range rss {
			fmt.Fprintf(tw, "%d\t%.1f\t%d\t%.0f\t%.2f\t%s\t\n", r.districts, float64(r.inputBytes)/1e6, r.exit,
				float64(r.peakRSS)/1e6, float64(r.peakRSS)/float64(r.inputBytes), r.elapsed.Round(100*time.Millisecond))
		}
		_ = tw.Flush()
	}
	fmt.Fprintln(w)
}

func fmtMs(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64) + "ms"
}

// rootTap counts, per snapshot id, the Commit requests that write the
// snapshot's root document and the encoded bytes of those writes, as a
// tap between client and server would: it reads the requests, changes
// nothing.
type rootTap struct {
	mu   sync.Mutex
	byID map[string][2]int // snapshot id → commits, bytes
}

func (t *rootTap) interceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if cr, ok := req.(*firestorepb.CommitRequest); ok {
		seen := map[string]bool{}
		for _, w := range cr.GetWrites() {
			name := w.GetDelete()
			if u := w.GetUpdate(); u != nil {
				name = u.GetName()
			}
			_, path, _ := strings.Cut(name, "/documents/")
			segs := strings.Split(path, "/")
			if len(segs) != 2 || segs[0] != DefaultCollection {
				continue
			}
			t.mu.Lock()
			c := t.byID[segs[1]]
			if !seen[segs[1]] {
				c[0]++
				seen[segs[1]] = true
			}
			c[1] += proto.Size(w)
			t.byID[segs[1]] = c
			t.mu.Unlock()
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// take returns and forgets what the tap counted for snapshot id.
func (t *rootTap) take(id string) (commits, bytes int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.byID[id]
	delete(t.byID, id)
	return c[0], c[1]
}
