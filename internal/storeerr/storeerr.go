// Package storeerr names the store — Firestore, the PostgreSQL lock
// database — that a command waited on in vain: an error that says a store
// did not answer in time, or refused the connection, becomes an
// *UnreachableError that names the store by its endpoint and says which
// bound ran out.
package storeerr

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/snapshot"
)

// UnreachableError says that a store did not answer in time or could not
// be reached. Its message names the store by endpoint, what went
// unanswered when that is not what Err says first, and the bound that ran
// out; Err says what was being done.
type UnreachableError struct {
	// Endpoint names the store by address, never by credentials: "the
	// Firestore emulator at 127.0.0.1:8080".
	Endpoint string
	// What went unanswered ("the lock's renewals"); "" when Err says it.
	What string
	// Within is the bound that ran out: "2s (--timeout)", or with What a
	// phrase ("before the lock expired (--lock-ttl 5s)"); "" when no bound
	// ran out (the store refused the connection).
	Within string
	Err    error
}

// Error is Summary, then what was being done.
func (e *UnreachableError) Error() string { return e.Summary() + ": " + e.Err.Error() }

// Summary is the message without Err's: the store, and the bound that ran
// out.
func (e *UnreachableError) Summary() string {
	switch {
	case e.Within == "":
		return e.Endpoint + " is unreachable"
	case e.What != "":
		return fmt.Sprintf("no answer from %s to %s %s", e.Endpoint, e.What, e.Within)
	}
	return fmt.Sprintf("no answer from %s within %s", e.Endpoint, e.Within)
}

// Unwrap returns Err.
func (e *UnreachableError) Unwrap() error { return e.Err }

// timedOut reports whether err means a store did not answer in time.
func timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, snapshot.ErrTimeout) ||
		errors.Is(err, locking.ErrNetworkTimeout) || status.Code(err) == codes.DeadlineExceeded
}

// Unreachable reports whether err means a store did not answer in time or
// refused the connection. A cancellation (a signal) is neither.
func Unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	return timedOut(err) || errors.Is(err, locking.ErrServiceUnavailable) || status.Code(err) == codes.Unavailable
}

// Wrap returns err in a copy of u, u.Err set to err, when err says a store
// did not answer (see Unreachable) and names none yet; any other error it
// returns as it is. A store that refused the connection did not run out
// of a bound, so then What and Within are dropped.
func Wrap(err error, u UnreachableError) error {
	if !Unreachable(err) || errors.As(err, new(*UnreachableError)) {
		return err
	}
	if !timedOut(err) {
		u.What, u.Within = "", ""
	}
	u.Err = err
	return &u
}

// FirestoreEndpoint names the Firestore a client reaches: the emulator at
// emulatorHost when that is set, else the production endpoint with the
// database and, when given, the project.
func FirestoreEndpoint(emulatorHost, project, database string) string {
	if emulatorHost != "" {
		return "the Firestore emulator at " + emulatorHost
	}
	s := "Firestore at firestore.googleapis.com:443 (database " + database
	if project != "" {
		s += ", project " + project
	}
	return s + ")"
}
