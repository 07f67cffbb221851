// Command withemulator runs a command with a Firestore emulator: it starts
// one on a free loopback port, exports FIRESTORE_EMULATOR_HOST to the
// command, and stops the emulator when the command ends, passing on its exit
// code. `make test`, `make demo` and `make bench` use it so that every
// package's tests share one emulator.
//
//	go run ./emulator/withemulator -- go test ./...
//
// With --serve it runs no command: it keeps the emulator running in the
// foreground until Ctrl-C (SIGINT) or SIGTERM, and prints the export lines
// that point another shell at it, followed by any NAME=value given after
// --serve. --port puts the emulator on a chosen loopback port instead of a
// free one, so the address is known before it starts. `make emulator` is
//
//	withemulator --port 8686 --serve GOOGLE_CLOUD_PROJECT=snapwriter-demo
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/internal/harness"
)

const usage = "withemulator [--port N] [--] command [args...]\n       withemulator [--port N] --serve [NAME=value...]"

func main() {
	args := os.Args[1:]
	port := 0
	if len(args) >= 2 && args[0] == "--port" {
		p, err := strconv.Atoi(args[1])
		if err != nil || p <= 0 || p > 65535 {
			fmt.Fprintf(os.Stderr, "withemulator: --port %q: want a TCP port\nusage: %s\n", args[1], usage)
			os.Exit(2)
		}
		port, args = p, args[2:]
	}
	start := func(ctx context.Context) (harness.Server, error) {
		// A fresh emulator, even if one is set in the environment: tests
		// must not depend on what a developer left running.
		emu, err := emulator.Start(ctx, emulator.WithoutReuse(), emulator.WithPort(port))
		if err != nil {
			return harness.Server{}, err
		}
		return harness.Server{
			Ready: "Firestore emulator ready on " + emu.Host,
			Env:   emulator.HostEnv + "=" + emu.Host,
			Stop:  func() error { sayPauses(emu); return emu.Stop() },
		}, nil
	}
	if len(args) > 0 && args[0] == "--serve" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := harness.Serve(ctx, "withemulator", os.Stderr, start, args[1:]...)
		stop()
		os.Exit(code)
	}
	os.Exit(harness.Main("withemulator", usage, args, start))
}

// sayPauses says on stderr, at the end, when the emulator's JVM stopped
// for a second or more at a time to collect garbage: a test that failed
// then may have met a stalled emulator, not a fault of the code it tests
// (emulator.GCPauses).
func sayPauses(emu *emulator.Emulator) {
	p, err := emu.Pauses()
	switch {
	case err != nil:
		fmt.Fprintf(os.Stderr, "withemulator: %v\n", err)
	case p.Stalled():
		why := ""
		if p.Full > 0 {
			why = "its heap filled (it keeps every document version it was sent) and "
		}
		fmt.Fprintf(os.Stderr, "withemulator: the emulator stopped for garbage collection %s: "+
			"%severy request waited; a test that failed then may have met a stalled emulator, "+
			"not a fault of its own\n", p, why)
	}
}
