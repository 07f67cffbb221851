package signals

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Stopped is the cause (context.Cause) of a context NotifyContext ended:
// the signal that asked the process to stop. It matches context.Canceled,
// as the context's own error does, so that code that treats a cancelled
// context as a stop goes on doing so.
type Stopped struct {
	Signal syscall.Signal
}

func (s Stopped) Error() string { return "stopped by " + Name(s.Signal) }

// Is reports whether target is context.Canceled.
func (s Stopped) Is(target error) bool { return target == context.Canceled }

// Name is the signal's conventional name (SIGINT, SIGTERM), as operators
// and the shell say it; other signals by the runtime's description.
func Name(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return fmt.Sprintf("signal %d (%s)", int(s), s)
}

// NotifyContext is signal.NotifyContext for SIGINT and SIGTERM, whose
// context ends with a Stopped cause naming the signal: the standard one's
// cause says which signal only in words. The CLI turns it into the exit
// code 128+n in one place, whatever the command did after.
func NotifyContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sigs:
			if n, ok := s.(syscall.Signal); ok {
				cancel(Stopped{Signal: n})
			}
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		// Default handling again: a signal after the command ends the
		// process, as it would any program.
		signal.Stop(sigs)
		cancel(nil)
	}
}

// Received is the signal that ended ctx (NotifyContext's, or a context
// derived from it or cancelled with a Stopped cause), 0 when none did.
func Received(ctx context.Context) syscall.Signal {
	var s Stopped
	if errors.As(context.Cause(ctx), &s) {
		return s.Signal
	}
	return 0
}
