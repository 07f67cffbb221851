// Package signals serves a command that cleans up after an interruption:
// the first SIGINT or SIGTERM ends its work (NotifyContext, in main, ends
// the command's context with a cause naming the signal: Stopped, which the
// CLI turns into the exit code 128+n); a Watch lets a second one end the
// cleanup, for a user who will not wait for it.
package signals

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
)

// A Watch notes the SIGINT and SIGTERM a command gets while it runs.
type Watch struct {
	first   atomic.Int32 // the first signal's number
	cleanup context.Context
	stop    func()
}

// Start watches for SIGINT and SIGTERM until Stop. The first is noted
// (Signal); the second calls onSecond, if not nil, and ends Cleanup.
func Start(ctx context.Context, onSecond func()) *Watch {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	cleanup, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	w := &Watch{cleanup: cleanup}
	w.stop = sync.OnceFunc(func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	})
	go func() {
		select {
		case s := <-sigs:
			if n, ok := s.(syscall.Signal); ok {
				w.first.Store(int32(n))
			}
		case <-done:
			return
		}
		select {
		case <-sigs:
			if onSecond != nil {
				onSecond()
			}
			cancel()
		case <-done:
		}
	}()
	return w
}

// Cleanup is the context to clean up under once the command's context has
// ended: it carries that context's values, not its end, and ends at the
// second signal or at Stop.
func (w *Watch) Cleanup() context.Context { return w.cleanup }

// Signal is the first signal's number (the exit code comes from Received,
// on the command's context), 0 while none came.
func (w *Watch) Signal() int { return int(w.first.Load()) }

// Stop ends the watch and Cleanup. It may be called more than once.
func (w *Watch) Stop() { w.stop() }
