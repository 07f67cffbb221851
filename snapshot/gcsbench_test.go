package snapshot_test

// An external test package: gcsserver reaches package snapshot through
// input/gcs and internal/storeerr, so package snapshot's own tests cannot
// import it.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/gcsserver"
	"github.com/snapwriter/snapwriter/internal/benchutil"
)

// gcsBenchBucket is the bucket the gs:// run reads the folder from.
const gcsBenchBucket = "bench"

// gcsRSSRun is one `snapwriter write` of a per-district folder: from a
// local directory or from gs://.
type gcsRSSRun struct {
	exit    int
	peakRSS int64 // bytes
	elapsed time.Duration
	readMs  int64 // "input read" durationMs (gs:// only; -1 when not logged)
}

// gcsRSSResult compares one folder written from disk and from Cloud
// Storage (issue #34: peak RSS from gs:// within 1.2× of disk).
type gcsRSSResult struct {
	districts   int
	folderBytes int64 // every file of the folder: what the gs:// read spools
	disk, gs    gcsRSSRun
}

// ratio is the gs:// run's peak RSS over the disk run's.
func (r gcsRSSResult) ratio() float64 { return float64(r.gs.peakRSS) / float64(r.disk.peakRSS) }

// withSpool is the gs:// run's peak RSS plus its spool over the disk
// run's peak RSS: the memory the gs:// read costs on Cloud Run, whose
// temporary filesystem is in memory.
func (r gcsRSSResult) withSpool() float64 {
	return float64(r.gs.peakRSS+r.folderBytes) / float64(r.disk.peakRSS)
}

// BenchmarkGCSInputRSS compares the built binary's peak RSS writing a
// per-district snapshot folder of BENCH_GCS_DISTRICTS districts (default
// 5000; comma-separated; "none" skips it) read from disk and read from
// gs:// (issue #34: within 1.2×), and prints a table of the two, their
// ratio and the bytes the gs:// read spools to TMPDIR (runGCSRSS).
func BenchmarkGCSInputRSS(b *testing.B) {
	districts, err := gcsBenchDistricts()
	if err != nil {
		b.Fatal(err)
	}
	if len(districts) == 0 {
		b.Skip("BENCH_GCS_DISTRICTS=none")
	}
	start := time.Now()
	var rs []gcsRSSResult
	for i := 0; i < b.N; i++ {
		rs = runGCSRSS(b, b.TempDir(), districts)
	}
	fmt.Printf("\n=== folder input benchmark: disk vs gs:// (%s) ===\n", time.Since(start).Round(time.Second))
	printGCSRSS(os.Stdout, rs)
	fmt.Println()
}

// gcsBenchDistricts reads BENCH_GCS_DISTRICTS: positive district counts,
// comma-separated (default 5000), or "none".
func gcsBenchDistricts() ([]int, error) {
	v := os.Getenv("BENCH_GCS_DISTRICTS")
	switch v {
	case "":
		return []int{5000}, nil
	case "none":
		return nil, nil
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("BENCH_GCS_DISTRICTS: %q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// runGCSRSS generates a per-district folder of each district count once
// with the built binary (`generate --folder`), uploads it to a Cloud
// Storage server run in this process (gcsserver: fake-gcs-server, reached
// by STORAGE_EMULATOR_HOST as Cloud Storage is), and writes it twice,
// each time into a fresh emulator project and in full: `write --input
// DIR` and `write --input gs://bench/snapshots/DATE/`. It records each
// write's peak RSS (under maxrss, as runRSS does) and the folder's bytes.
//
// The gs:// read copies every object into one temporary file that it
// unlinks as soon as it is created, so the spool cannot be measured in
// TMPDIR after the fact; its size is the folder's total bytes (every
// object is spooled, manifest included), and that is what is reported.
func runGCSRSS(b *testing.B, tools string, districts []int) []gcsRSSResult {
	bin := benchutil.GoBuild(b, tools, "github.com/snapwriter/snapwriter/cmd/snapwriter")
	// The writes run under maxrss, which reports a child's peak RSS: read
	// here, a child's would include this process's own (see maxrss).
	maxrss := benchutil.GoBuild(b, tools, "github.com/snapwriter/snapwriter/internal/benchutil/maxrss")
	srv, err := gcsserver.Start(0)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	srv.CreateBucket(gcsBenchBucket)
	ctx := context.Background()
	var out []gcsRSSResult
	for i, n := range districts {
		date := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i).Format("2006-01-02")
		dir := filepath.Join(b.TempDir(), date)
		if msg, err := exec.Command(bin, "generate", "--date", date, "--districts", strconv.Itoa(n), "--folder", dir).CombinedOutput(); err != nil {
			b.Fatalf("generate --folder %d districts: %v\n%s", n, err, msg)
		}
		size, err := benchutil.DirBytes(dir)
		if err != nil {
			b.Fatal(err)
		}
		prefix := "snapshots/" + date + "/"
		if err := srv.PutDir(gcsBenchBucket, prefix, dir, "manifest.json"); err != nil {
			b.Fatal(err)
		}
		// An emulator per district count: it keeps every document
		// version in its heap, and two 20,000-district writes would
		// crowd a small machine.
		emu, err := emulator.Start(ctx, emulator.WithoutReuse())
		if err != nil {
			b.Fatal(err)
		}
		r := gcsRSSResult{districts: n, folderBytes: size}
		env := append(os.Environ(), emulator.HostEnv+"="+emu.Host, gcsserver.HostEnv+"="+srv.Host)
		// A cold emulator runs at half speed for its first few thousand
		// documents: an uncounted write of 500 districts first, so that
		// the two writes' durations compare (their peak RSS does anyway).
		warm := exec.Command(bin, "generate", "--date", date, "--districts", "500")
		warm.Env = env
		if err := pipeInto(warm, exec.Command(bin, "write", "--input", "-", "--project", "bench-gcs-warmup", "--log-level", "warn"), env); err != nil {
			emu.Stop()
			b.Fatalf("warm-up write: %v", err)
		}
		write := func(input, project string) gcsRSSRun {
			run, err := measureWrite(maxrss, bin, env, input, project)
			if err != nil {
				emu.Stop()
				b.Fatalf("write --input %s: %v", input, err)
			}
			if run.exit != 0 {
				// Unlike a refused write in runRSS, a failed write makes
				// the comparison meaningless.
				b.Errorf("write --input %s (%d districts): exit %d", input, n, run.exit)
			}
			return run
		}
		r.disk = write(dir, fmt.Sprintf("bench-gcs-disk-%d", n))
		r.gs = write("gs://"+gcsBenchBucket+"/"+prefix, fmt.Sprintf("bench-gcs-gs-%d", n))
		emu.Stop()
		b.Logf("%d districts, folder %.1f MB: disk %.0f MB in %s, gs:// %.0f MB in %s (read %d ms): gs/disk %.2f, gs+spool/disk %.2f",
			n, float64(size)/1e6, float64(r.disk.peakRSS)/1e6, r.disk.elapsed.Round(100*time.Millisecond),
			float64(r.gs.peakRSS)/1e6, r.gs.elapsed.Round(100*time.Millisecond), r.gs.readMs, r.ratio(), r.withSpool())
		b.ReportMetric(float64(r.disk.peakRSS)/(1<<20), fmt.Sprintf("disk-rss-%d-MiB", n))
		b.ReportMetric(float64(r.gs.peakRSS)/(1<<20), fmt.Sprintf("gs-rss-%d-MiB", n))
		b.ReportMetric(r.ratio(), fmt.Sprintf("gs/disk-%d", n))
		b.ReportMetric(float64(size)/(1<<20), fmt.Sprintf("spool-%d-MiB", n))
		out = append(out, r)
		// Hundreds of MB at 20,000 districts, on disk and in this
		// process's memory (the server's objects).
		deleteFolder(srv, dir, prefix)
		_ = os.RemoveAll(dir)
	}
	b.ReportMetric(0, "ns/op")
	return out
}

// deleteFolder removes the uploaded copy of the folder dir (its files are
// the objects prefix+name) from the server, which holds it in this
// process's memory. Best effort: only memory is at stake.
func deleteFolder(srv *gcsserver.Server, dir, prefix string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		_ = srv.Delete(gcsBenchBucket, prefix+e.Name())
	}
}

// measureWrite runs `snapwriter write --input input` under maxrss with
// env, into project, and returns its exit code, peak RSS, duration and
// the "input read" line's durationMs.
func measureWrite(maxrss, bin string, env []string, input, project string) (gcsRSSRun, error) {
	w := exec.Command(maxrss, bin, "write", "--input", input, "--project", project, "--log-level", "info")
	w.Env = env
	var stderr bytes.Buffer
	w.Stdout, w.Stderr = io.Discard, &stderr
	t0 := time.Now()
	err := w.Run()
	run := gcsRSSRun{elapsed: time.Since(t0), readMs: -1}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return run, err
	}
	run.exit = w.ProcessState.ExitCode()
	sc := bufio.NewScanner(&stderr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	found := false
	for sc.Scan() {
		line := sc.Text()
		if kb, ok := strings.CutPrefix(line, "maxrss "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(kb), 10, 64)
			if err != nil {
				return run, fmt.Errorf("maxrss printed %q", line)
			}
			run.peakRSS, found = n*1024, true
			continue
		}
		var e struct {
			Message    string `json:"message"`
			DurationMs int64  `json:"durationMs"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Message == "input read" {
			run.readMs = e.DurationMs
		}
	}
	if !found {
		return run, fmt.Errorf("maxrss reported nothing (exit %d): %s", run.exit, tailString(stderr.String(), 2000))
	}
	return run, nil
}

// pipeInto runs from | to, to with env.
func pipeInto(from, to *exec.Cmd, env []string) error {
	to.Env = env
	var err error
	if to.Stdin, err = from.StdoutPipe(); err != nil {
		return err
	}
	if out, err := func() ([]byte, error) {
		if err := from.Start(); err != nil {
			return nil, err
		}
		out, err := to.CombinedOutput()
		if werr := from.Wait(); err == nil && werr != nil {
			err = fmt.Errorf("%s: %w", from, werr)
		}
		return out, err
	}(); err != nil {
		return fmt.Errorf("%w\n%s", err, tailString(string(out), 2000))
	}
	return nil
}

func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// printGCSRSS writes the disk-vs-gs:// table.
func printGCSRSS(w io.Writer, rs []gcsRSSResult) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintln(w, "\npeak RSS of `snapwriter write` of a per-district folder: from disk vs from gs:// (the built binary, one full write each)")
	fmt.Fprintln(w, "spool MB: the folder's bytes, all of which the gs:// read copies to an unlinked file in TMPDIR — memory on Cloud Run, whose /tmp is in memory")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "districts\tfolder MB\tdisk exit\tdisk RSS MB\tdisk took\tgs exit\tgs RSS MB\tgs took\tgs read\tgs/disk\tspool MB\t(gs RSS+spool)/disk\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%d\t%.1f\t%d\t%.0f\t%s\t%d\t%.0f\t%s\t%s\t%.2f\t%.1f\t%.2f\t\n", r.districts, float64(r.folderBytes)/1e6,
			r.disk.exit, float64(r.disk.peakRSS)/1e6, r.disk.elapsed.Round(100*time.Millisecond),
			r.gs.exit, float64(r.gs.peakRSS)/1e6, r.gs.elapsed.Round(100*time.Millisecond), fmtReadMs(r.gs.readMs),
			r.ratio(), float64(r.folderBytes)/1e6, r.withSpool())
	}
	_ = tw.Flush()
}

func fmtReadMs(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).Round(100 * time.Millisecond).String()
}
