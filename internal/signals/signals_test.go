package signals

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

type key struct{}

// raise sends sig to this process, which a Watch has asked to be told of
// it instead of being ended.
func raise(t *testing.T, sig os.Signal) {
	t.Helper()
	p, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(sig); err != nil {
		t.Skipf("cannot signal this process: %v", err)
	}
}

// Tests that raise signals do not run in parallel: every Watch of the
// process sees each signal.

func TestWatchFirstNotedSecondEndsCleanup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	seconds := make(chan struct{}, 2)
	w := Start(ctx, func() { seconds <- struct{}{} })
	defer w.Stop()
	cancel()
	if w.Signal() != 0 || w.Cleanup().Err() != nil {
		t.Fatalf("before any signal: Signal() = %d, Cleanup().Err() = %v", w.Signal(), w.Cleanup().Err())
	}
	if w.Cleanup().Value(key{}) != "v" {
		t.Error("Cleanup does not carry the context's values")
	}

	raise(t, syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for w.Signal() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := w.Signal(); got != int(syscall.SIGTERM) {
		t.Fatalf("Signal() = %d, want %d (SIGTERM)", got, syscall.SIGTERM)
	}
	if w.Cleanup().Err() != nil {
		t.Fatal("the first signal ended Cleanup")
	}

	raise(t, os.Interrupt)
	select {
	case <-w.Cleanup().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the second signal did not end Cleanup")
	}
	if len(seconds) != 1 {
		t.Errorf("onSecond called %d times, want once", len(seconds))
	}
	if got := w.Signal(); got != int(syscall.SIGTERM) {
		t.Errorf("after the second signal, Signal() = %d, want the first's, %d", got, syscall.SIGTERM)
	}
}

func TestWatchStopEndsCleanup(t *testing.T) {
	w := Start(context.Background(), nil)
	w.Stop()
	w.Stop()
	if w.Cleanup().Err() == nil {
		t.Error("Stop did not end Cleanup")
	}
	if w.Signal() != 0 {
		t.Errorf("Signal() = %d, want 0", w.Signal())
	}
}
