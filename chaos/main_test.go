//go:build chaos

package chaos

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/pgserver"
)

var (
	emu *emulator.Emulator
	pg  *pgserver.Server
	// bin is the snapwriter binary under test, built once by TestMain.
	bin string
	// work holds the binary and the generated inputs.
	work string
)

// binaryEnv names a snapwriter binary to test instead of building
// ./cmd/snapwriter.
const binaryEnv = "CHAOS_BINARY"

// defaultParallel is how many scenarios run at once unless -parallel is
// given. go test's default is GOMAXPROCS (2 here), but the scenarios spend
// their time waiting on child processes, timers and the emulator, not on
// this process's CPU; more at once would only slow the emulator, which
// every scenario shares, and stretch the lock TTLs the scenarios rely on.
const defaultParallel = 5

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", strconv.Itoa(defaultParallel))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "snapwriter-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	work = dir
	if b := os.Getenv(binaryEnv); b != "" {
		// A binary built elsewhere: an older revision, to see which
		// scenarios catch its faults.
		bin = b
		fmt.Fprintf(os.Stderr, "chaos: testing %s (%s)\n", bin, binaryEnv)
	} else {
		bin = filepath.Join(dir, "snapwriter")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/snapwriter/snapwriter/cmd/snapwriter").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: go build ./cmd/snapwriter: %v\n%s", err, out)
			return 1
		}
	}
	code := pgserver.Main(m, &pg, func() int { return emulator.Main(m, &emu) })
	printMatrix()
	return code
}

// The fault matrix: one row per scenario, printed as each ends and all
// together at the end of the run, in the README's table format.
var matrix struct {
	sync.Mutex
	rows [][5]string
}

func addRow(r [5]string) {
	matrix.Lock()
	defer matrix.Unlock()
	matrix.rows = append(matrix.rows, r)
}

func formatRow(r [5]string) string {
	return fmt.Sprintf("| %s | %s | %s | %s | %s |", r[0], r[1], r[2], r[3], r[4])
}

func printMatrix() {
	matrix.Lock()
	defer matrix.Unlock()
	if len(matrix.rows) == 0 {
		return
	}
	sort.SliceStable(matrix.rows, func(i, j int) bool { return matrix.rows[i][0] < matrix.rows[j][0] })
	fmt.Println("\nchaos: fault matrix")
	fmt.Println("chaos: | scenario | outcome | exit codes | recovery | docs lost |")
	fmt.Println("chaos: |---|---|---|---|---|")
	for _, r := range matrix.rows {
		fmt.Println("chaos: " + formatRow(r))
	}
}
