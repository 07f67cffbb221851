package signals

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// A Pauser is told that the process is about to be paused and that it was
// resumed: snapshot.Maintenance, whose writes hold their chunks and renew
// their locks.
type Pauser interface {
	// Notice: the process is about to be paused. It returns once the
	// pauser is ready for it, or when ctx ends.
	Notice(ctx context.Context) error
	// Resume: the process was resumed.
	Resume(ctx context.Context) error
}

// TerminalNotice bounds how long Ctrl-Z at a terminal waits for the
// pauser's Notice (the writes' lock renewals, milliseconds when the store
// answers) before the process stops: a user who suspends a command expects
// it to stop at once, and a renewal that is not answered within it would
// not be soon either.
const TerminalNotice = 3 * time.Second

// WatchPauses handles SIGTSTP and SIGCONT for p until the func it returns
// is called, one signal at a time, in the order they come.
//
// Without a terminal — a Cloud Run job task, which gets SIGTSTP 10 s
// before a maintenance migration freezes it and SIGCONT after — SIGTSTP
// does not stop the process, as it would by default 10 s early: it calls
// p.Notice, and SIGCONT p.Resume.
//
// At a terminal (terminal true: stdin or stderr is one), SIGTSTP — Ctrl-Z —
// still suspends the process, as the user expects, but only after
// p.Notice has returned (within TerminalNotice): the process then stops
// itself with SIGSTOP, which cannot be caught, so there is no moment
// without a handler. SIGCONT (fg, bg) calls p.Resume.
func WatchPauses(p Pauser, terminal bool) (stop func()) {
	suspend := func() { _ = syscall.Kill(os.Getpid(), syscall.SIGSTOP) }
	if !terminal {
		suspend = nil
	}
	return watchPauses(p, suspend, TerminalNotice)
}

// watchPauses is WatchPauses, stopping the process with suspend after a
// SIGTSTP's notice (nil: not stopping), the notice bounded by within.
func watchPauses(p Pauser, suspend func(), within time.Duration) (stop func()) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTSTP, syscall.SIGCONT)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			var s os.Signal
			select {
			case s = <-sigs:
			case <-done:
				return
			}
			if s != syscall.SIGTSTP {
				// The pauser reports what it could not confirm in its
				// own log lines, and its writes end as on a lost lock.
				_ = p.Resume(context.Background())
				continue
			}
			if suspend == nil {
				_ = p.Notice(context.Background())
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), within)
			_ = p.Notice(ctx)
			cancel()
			suspend()
		}
	}()
	return sync.OnceFunc(func() {
		// Default handling again (Ctrl-Z stops) once the command is over.
		signal.Stop(sigs)
		close(done)
		<-exited
	})
}
