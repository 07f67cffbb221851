// Command snapwriter writes daily district-statistics snapshots into Cloud
// Firestore under a fenced lock: root document first, then the districts in
// chunked, retried, fence-checked transactions, then a manifest that records
// any partial failure.
//
// Its exit codes are listed in README.md and docs/cli.md, rendered from
// the table of endings (internal/ending), and decided in app.run (a
// signal: 128+n; a panic: 1) and exit.go (every other ending).
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/snapwriter/snapwriter/internal/buildinfo"
	"github.com/snapwriter/snapwriter/internal/signals"
	"github.com/snapwriter/snapwriter/internal/telemetry"
	"github.com/snapwriter/snapwriter/snapshot"
)

// telemetryFlush bounds the export of the last spans and metrics at exit:
// inside Cloud Run's 10 s between SIGTERM and SIGKILL, after the write's
// grace period.
const telemetryFlush = 3 * time.Second

func main() {
	// The first SIGINT or SIGTERM ends ctx with a cause that names it:
	// every command cleans up as its context ends, and app.run turns the
	// cause into the exit code 128+n.
	ctx, stop := signals.NotifyContext(context.Background())
	// OpenTelemetry, when OTEL_TRACES_EXPORTER or OTEL_METRICS_EXPORTER
	// asks for it (docs/observability.md); a configuration it cannot
	// follow is a usage error, reported before anything is done.
	tel, err := telemetry.Setup(ctx, buildinfo.Version())
	if err != nil {
		fmt.Fprintf(os.Stderr, "snapwriter: %v\n", err)
		os.Exit(exitUsage)
	}
	// Cloud Run's SIGTSTP, 10 s before a maintenance migration freezes
	// the task: every writer of the process holds its chunks and renews
	// its lock, and confirms the lock at SIGCONT (or after the wait)
	// before its next chunk. At a terminal Ctrl-Z still suspends, after the
	// renewals. Commands that write nothing have nothing to hold: without
	// a terminal they ignore SIGTSTP, at one they stop as ever.
	maint := snapshot.NewMaintenance(snapshot.DefaultMaintenanceWait)
	stopPauses := signals.WatchPauses(maint, atTerminal())
	a := newApp(os.Stdin, os.Stdout, os.Stderr, os.LookupEnv)
	a.stderrTerminal = term.IsTerminal(int(os.Stderr.Fd()))
	a.writerOptions = append(a.writerOptions, snapshot.WithMaintenance(maint))
	a.stdinTerminal = term.IsTerminal(int(os.Stdin.Fd()))
	installTestHooks(a)
	code := a.run(ctx, os.Args[1:])
	stopPauses()
	stop()
	// On every exit, a failing or signalled run's too: its spans say why.
	fctx, cancel := context.WithTimeout(context.Background(), telemetryFlush)
	if err := tel.Shutdown(fctx); err != nil {
		fmt.Fprintf(os.Stderr, "snapwriter: exporting telemetry: %v\n", err)
	}
	cancel()
	os.Exit(code)
}

// atTerminal reports whether a person is at the process: stdin or stderr
// is a terminal. A Cloud Run task has neither.
func atTerminal() bool {
	return term.IsTerminal(int(os.Stdin.Fd())) || term.IsTerminal(int(os.Stderr.Fd()))
}
