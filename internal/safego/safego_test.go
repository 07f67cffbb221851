package safego

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"
)

func TestFuncRecoversIntoError(t *testing.T) {
	var g errgroup.Group
	g.Go(Func(func() error { panic("boom") }))
	g.Go(Func(func() error { return nil }))
	err := g.Wait()
	var pe *PanicError
	if !errors.As(err, &pe) || !errors.Is(err, ErrPanic) || err.Error() != "panic: boom" {
		t.Fatalf("Wait = %v, want the panic as an error", err)
	}
	if !strings.Contains(string(pe.Stack), "safego_test.go") {
		t.Errorf("stack does not name the panicking func:\n%s", pe.Stack)
	}
}

func TestRepanicKeepsFirstStack(t *testing.T) {
	var g errgroup.Group
	g.Go(Func(func() error { noMap()["x"] = 1; return nil }))
	first := g.Wait()
	err := func() (err error) {
		defer Recover(&err)
		Repanic(first)
		return nil
	}()
	if err != first {
		t.Fatalf("re-raised panic recovered as %v, want the first %v", err, first)
	}
	Repanic(errors.New("not a panic")) // does nothing
	Repanic(nil)
}

// noMap is a nil map, to write into by mistake.
func noMap() map[string]int { return nil }
