package backendkit

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

type ctxKey struct{}

// A task runs detached from its caller's cancellation but with its values,
// ends at the timeout, and the limit caps the tasks at once.
func TestJanitorRunsTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := NewJanitor(2, 10*time.Second)
		defer j.Close()
		caller, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
		ended := make(chan error, 3)
		task := func(ctx context.Context) {
			if ctx.Value(ctxKey{}) != "v" {
				t.Error("task lost the caller's values")
			}
			<-ctx.Done()
			ended <- ctx.Err()
		}
		start := time.Now()
		for range 2 {
			if !j.TryGo(caller, task) {
				t.Fatal("TryGo refused a task under the limit")
			}
		}
		if j.TryGo(caller, task) {
			t.Error("TryGo started a third task over a limit of 2")
		}
		cancel() // the caller returns; its tasks carry on
		synctest.Wait()
		if len(ended) != 0 {
			t.Fatal("a task ended with its caller's context")
		}
		for range 2 {
			if err := <-ended; !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("task ended with %v; want its timeout", err)
			}
		}
		if el := time.Since(start); el != 10*time.Second {
			t.Errorf("tasks ended after %s; want the 10s timeout", el)
		}
		synctest.Wait() // the slots are handed back as the tasks return
		if !j.TryGo(caller, func(context.Context) {}) {
			t.Error("a finished task's slot was not freed")
		}
	})
}

// Close cancels the tasks in flight and returns only once they have
// returned; afterwards TryGo starts nothing. (synctest.Test itself fails
// if any goroutine is left behind.)
func TestJanitorCloseWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := NewJanitor(4, time.Hour)
		running := make(chan struct{})
		var returned bool
		j.TryGo(context.Background(), func(ctx context.Context) {
			close(running)
			<-ctx.Done()
			time.Sleep(time.Second) // a task that takes a while to wind down
			returned = true
		})
		<-running
		start := time.Now()
		j.Close()
		if !returned {
			t.Error("Close returned before the task did")
		}
		if el := time.Since(start); el != time.Second {
			t.Errorf("Close took %s; want the task's 1s wind-down, not its 1h timeout", el)
		}
		if j.TryGo(context.Background(), func(context.Context) { t.Error("task ran after Close") }) {
			t.Error("TryGo after Close reported a start")
		}
		j.Close() // idempotent
	})
}
