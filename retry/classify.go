package retry

import (
	"errors"

	"github.com/cenkalti/backoff/v4"
	"github.com/snapwriter/snapwriter/retry/policy"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Classify reports whether err is worth retrying, and its gRPC code.
// An error marked Transient is retryable whatever its code.
//
// The code is that of a gRPC status anywhere in err's chain, else
// DeadlineExceeded or Canceled for a context error in the chain, else
// Unknown; nil is (false, OK). DEADLINE_EXCEEDED, UNAVAILABLE, INTERNAL,
// ABORTED and RESOURCE_EXHAUSTED are retryable, and so is a bare
// context.DeadlineExceeded, since that is what an attempt that hit its own
// AttemptTimeout returns (Do tells it apart from the caller's deadline by
// checking its own context). Everything else is permanent, context.Canceled
// included, as is any error marked Permanent, whatever its code.
func Classify(err error) (retryable bool, code codes.Code) {
	if err == nil {
		return false, codes.OK
	}
	code = codeOf(err)
	var p *backoff.PermanentError
	if errors.As(err, &p) {
		return false, code
	}
	var t *transientError
	if errors.As(err, &t) {
		return true, code
	}
	switch code {
	case codes.DeadlineExceeded, codes.Unavailable, codes.Internal, codes.Aborted, codes.ResourceExhausted:
		return true, code
	}
	return false, code
}

func codeOf(err error) codes.Code {
	// status.FromError looks through wrapping (errors.As on GRPCStatus).
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return status.FromContextError(err).Code()
}

// Permanent marks err as not worth retrying, whatever its code; errors.Is
// and errors.As (and so status.Code) still see err. Do returns err itself,
// without the marker. Permanent(nil) is nil.
//
// The marker is cenkalti/backoff's, so an op that returns backoff.Permanent
// is treated the same way.
func Permanent(err error) error { return backoff.Permanent(err) }

// Transient marks err as worth retrying, whatever its code: for example a
// commit whose outcome is unknown (the connection broke, or the client's
// own retry found the transaction closed) and that is safe to repeat.
// errors.Is and errors.As (and so status.Code) still see err; Permanent
// wins over Transient. Transient(nil) is nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err}
}

type transientError struct{ err error }

func (t *transientError) Error() string { return t.err.Error() }
func (t *transientError) Unwrap() error { return t.err }

// failure is how a failure with code counts against the policy's budget.
func failure(code codes.Code) policy.Failure {
	switch code {
	case codes.ResourceExhausted:
		return policy.PushBack
	case codes.Aborted:
		return policy.Contended
	}
	return policy.Retryable
}
