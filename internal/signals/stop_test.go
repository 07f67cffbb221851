package signals

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// The signal that ends NotifyContext's context is its cause, and a
// cancelled context still: Received names it, through a derived context
// and a wrapping error too.
func TestNotifyContextCause(t *testing.T) {
	ctx, stop := NotifyContext(context.Background())
	defer stop()
	derived, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	if s := Received(ctx); s != 0 {
		t.Fatalf("before any signal: Received = %v", s)
	}
	raise(t, syscall.SIGINT)
	select {
	case <-derived.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGINT did not end the context")
	}
	for _, c := range []context.Context{ctx, derived} {
		if s := Received(c); s != syscall.SIGINT {
			t.Errorf("Received = %v, want SIGINT", s)
		}
	}
	cause := fmt.Errorf("stopped: %w", context.Cause(derived))
	if !errors.Is(cause, context.Canceled) || cause.Error() != "stopped: stopped by SIGINT" {
		t.Errorf("cause %q: want one that matches context.Canceled and names SIGINT", cause)
	}
}

// stop ends the context without a signal: Received says none.
func TestNotifyContextStop(t *testing.T) {
	ctx, stop := NotifyContext(context.Background())
	stop()
	stop()
	if ctx.Err() == nil || Received(ctx) != 0 {
		t.Errorf("after stop: Err %v, Received %v", ctx.Err(), Received(ctx))
	}
	if n := Name(syscall.SIGTERM); n != "SIGTERM" {
		t.Errorf("Name(SIGTERM) = %q", n)
	}
}
