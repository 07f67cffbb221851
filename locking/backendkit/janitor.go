package backendkit

import (
	"context"
	"sync"
	"time"
)

// Janitor runs a backend's best-effort background work, such as deleting
// an expired lock that a read came across: at most a fixed number of tasks
// at once, each bounded by a timeout and detached from the cancellation of
// the call that started it, and all of them stopped and awaited by Close,
// so that a backend's Close leaves no goroutine behind.
//
// The zero Janitor is not usable; make one with NewJanitor. It is safe for
// concurrent use.
type Janitor struct {
	slots   chan struct{}
	timeout time.Duration

	closing context.Context // ends at Close, cancelling the tasks
	close   context.CancelFunc

	mu     sync.Mutex // orders TryGo's Add before Close's Wait
	closed bool
	tasks  sync.WaitGroup
}

// NewJanitor returns a Janitor that runs at most limit tasks at once (at
// least 1), each for at most timeout.
func NewJanitor(limit int, timeout time.Duration) *Janitor {
	closing, cancel := context.WithCancel(context.Background())
	return &Janitor{slots: make(chan struct{}, max(limit, 1)), timeout: timeout, closing: closing, close: cancel}
}

// TryGo starts task on its own goroutine and reports true, unless the
// limit of tasks is already running or Close has been called: then it
// starts nothing and reports false. It never blocks.
//
// task's context carries ctx's values but not its cancellation (the caller
// has usually returned by the time the task runs); it ends after the
// Janitor's timeout, or at Close.
func (j *Janitor) TryGo(ctx context.Context, task func(ctx context.Context)) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return false
	}
	select {
	case j.slots <- struct{}{}:
	default:
		return false // best-effort: enough is in flight already
	}
	j.tasks.Add(1)
	go func() {
		defer j.tasks.Done()
		defer func() { <-j.slots }()
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), j.timeout)
		defer cancel()
		stop := context.AfterFunc(j.closing, cancel)
		defer stop()
		task(tctx)
	}()
	return true
}

// Close cancels the tasks' contexts, waits for every task to return, and
// makes later TryGo calls start nothing. It is idempotent.
func (j *Janitor) Close() {
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	j.close()
	j.tasks.Wait()
}
