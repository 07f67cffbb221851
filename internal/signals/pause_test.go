package signals

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// pauser notes the calls a watch makes, in order.
type pauser struct{ calls chan string }

func (p pauser) Notice(ctx context.Context) error {
	p.calls <- "notice"
	return nil
}

func (p pauser) Resume(context.Context) error {
	p.calls <- "resume"
	return nil
}

// next waits for the next call.
func (p pauser) next(t *testing.T) string {
	t.Helper()
	select {
	case c := <-p.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no call within 10 s of the signal")
		return ""
	}
}

// Without a terminal, SIGTSTP is a notice and the process goes on (it
// would stop by default: this test would hang); SIGCONT resumes.
func TestWatchPausesWithoutTerminal(t *testing.T) {
	p := pauser{make(chan string, 4)}
	stop := watchPauses(p, nil, time.Second)
	defer stop()
	raise(t, syscall.SIGTSTP)
	if c := p.next(t); c != "notice" {
		t.Fatalf("SIGTSTP called %s; want notice", c)
	}
	raise(t, syscall.SIGCONT)
	if c := p.next(t); c != "resume" {
		t.Fatalf("SIGCONT called %s; want resume", c)
	}
	stop()
	stop()
}

// At a terminal, SIGTSTP is a notice and then the process suspends itself
// (here: suspend notes it); SIGCONT, after, resumes.
func TestWatchPausesAtTerminal(t *testing.T) {
	p := pauser{make(chan string, 4)}
	stop := watchPauses(p, func() { p.calls <- "suspend" }, time.Second)
	defer stop()
	raise(t, syscall.SIGTSTP)
	for _, want := range []string{"notice", "suspend"} {
		if c := p.next(t); c != want {
			t.Fatalf("SIGTSTP called %s; want %s", c, want)
		}
	}
	raise(t, syscall.SIGCONT)
	if c := p.next(t); c != "resume" {
		t.Fatalf("SIGCONT called %s; want resume", c)
	}
}
