// Command withemulator runs a command with a Firestore emulator: it starts
// one on a free loopback port, exports FIRESTORE_EMULATOR_HOST to the
// command, and stops the emulator when the command ends, passing on its exit
// code. `make test`, `make demo` and `make bench` use it so that every
// package's tests share one emulator.
//
//	go run ./emulator/withemulator -- go test ./...
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/internal/harness"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: withemulator [--] command [args...]")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	start := time.Now()
	// A fresh emulator, even if one is set in the environment: tests must
	// not depend on what a developer left running.
	emu, err := emulator.Start(ctx, emulator.WithoutReuse())
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "withemulator:", err)
		return 1
	}
	defer emu.Stop()
	fmt.Fprintf(os.Stderr, "withemulator: Firestore emulator ready on %s (%.1fs)\n", emu.Host, time.Since(start).Seconds())

	return harness.RunChild("withemulator", args, emulator.HostEnv+"="+emu.Host)
}
