// Package safego turns a panic in a goroutine the product starts into an
// error its caller sees, so that the CLI ends with exit 1 and the stack in
// its log instead of the runtime's crash: exit 2, which the CLI keeps for
// usage errors, and a stack only on stderr.
//
// golang.org/x/sync's errgroup (v0.25) does not carry a panic to Wait: a
// panic in a Go func ends the process. Wrap the func: g.Go(safego.Func(f)).
package safego

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// ErrPanic is matched by every PanicError.
var ErrPanic = errors.New("panic")

// PanicError is a panic recovered in a goroutine, with the goroutine's
// stack at the panic.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Is reports whether target is ErrPanic.
func (e *PanicError) Is(target error) bool { return target == ErrPanic }

// Unwrap is the panic's value when it is an error (a runtime error, or an
// error passed to panic).
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Func is f, returning a PanicError when f panics.
func Func(f func() error) func() error {
	return func() (err error) {
		defer Recover(&err)
		return f()
	}
}

// Recover, deferred, sets *errp to a PanicError when the function panics.
// A PanicError already recovered (a panic re-raised with Repanic) keeps
// its first stack.
func Recover(errp *error) {
	v := recover()
	if v == nil {
		return
	}
	if pe, ok := v.(*PanicError); ok {
		*errp = pe
		return
	}
	*errp = &PanicError{Value: v, Stack: debug.Stack()}
}

// Repanic panics with err when it is a PanicError: for a caller whose
// goroutines' errors are not otherwise returned (one that collects
// results, not errors), so that the panic goes on up the caller's own
// goroutine, where the CLI recovers it.
func Repanic(err error) {
	var pe *PanicError
	if errors.As(err, &pe) {
		panic(pe)
	}
}
