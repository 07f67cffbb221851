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
	"os"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/internal/harness"
)

func main() {
	os.Exit(harness.Main("withemulator", "withemulator [--] command [args...]", os.Args[1:], start))
}

func start(ctx context.Context) (harness.Server, error) {
	// A fresh emulator, even if one is set in the environment: tests must
	// not depend on what a developer left running.
	emu, err := emulator.Start(ctx, emulator.WithoutReuse())
	if err != nil {
		return harness.Server{}, err
	}
	return harness.Server{
		Ready: "Firestore emulator ready on " + emu.Host,
		Env:   emulator.HostEnv + "=" + emu.Host,
		Stop:  emu.Stop,
	}, nil
}
