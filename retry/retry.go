// Package retry runs a Firestore operation again after transient
// failures, with jittered exponential backoff, a timeout per attempt and
// one for all attempts. Policies are plain values; the loop is
// policy.Retry, the one that lock acquisition and lease renewal use too,
// and this package adds what gRPC status codes mean to it (Classify).
package retry

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/retry/policy"
	"google.golang.org/grpc/codes"
)

// Policy is the retry policy (see package policy for its fields): the one
// locking.Acquire uses too, with the same meaning for every zero value.
// MaxRetries 0 makes no retries and Unlimited lifts the cap; TotalTimeout
// 0 and AttemptTimeout 0 set no bound; ContentionWait 0 gives ABORTED no
// extra retries.
type Policy = policy.Policy

// Unlimited, as Policy.MaxRetries, lifts the cap on retries: Do then
// retries until TotalTimeout passes, ctx ends, or a failure is permanent.
const Unlimited = policy.Unlimited

// DefaultPolicy is the policy for Firestore commits: waits from 1 s up to
// 30 s, doubling, ±20% jitter, 3 retries, 30 s per attempt, 300 s in all.
func DefaultPolicy() Policy {
	return Policy{
		Initial:        time.Second,
		Max:            30 * time.Second,
		Multiplier:     2,
		Jitter:         0.2,
		MaxRetries:     3,
		AttemptTimeout: 30 * time.Second,
		TotalTimeout:   300 * time.Second,
	}
}

// Delay is the wait Do makes before retry number n (0 is the wait after
// the first failed attempt) after a failure with code, for a uniform u in
// [0, 1): p.Delay(n, u), that is min(Max, Initial·Multiplier^n) scaled by
// 1 + Jitter·(2u−1). RESOURCE_EXHAUSTED means the server is shedding load,
// so its wait is exactly twice the other codes' at the same n and u (its
// cap is 2·Max). Delay is pure; a negative n counts as 0 and u is clamped
// to [0, 1].
func Delay(p Policy, n int, code codes.Code, u float64) time.Duration {
	return p.DelayAfter(failure(code), n, u)
}

// Stats describes a Do call.
type Stats struct {
	Attempts int           // calls of op
	Retries  int           // calls of op after the first
	LastCode codes.Code    // code of the last attempt's error, OK on success
	Elapsed  time.Duration // wall time of the whole call, waits included
}

// Option configures Do. It is the loop's own option (policy.Option), so
// Do's options are those of policy.Retry; Do sets the budget's rules
// itself.
type Option = policy.Option

// WithNotify calls fn before each wait with the error that caused it and
// the wait; it runs on Do's goroutine.
func WithNotify(fn func(err error, wait time.Duration)) Option { return policy.WithNotify(fn) }

// WithGate makes every attempt wait for gate first: gate runs before each
// call of op, under Do's context and TotalTimeout but outside the
// attempt's AttemptTimeout, so that a wait for a rate limiter's budget
// (pacing.Budget.Wait) is not taken for a slow answer. An error from gate
// ends Do: the attempt is not made, and Do returns the error.
func WithGate(gate func(ctx context.Context) error) Option { return policy.WithGate(gate) }

// Do runs op until it succeeds, fails permanently (see Classify), uses up
// p.MaxRetries (none for 0, no cap for Unlimited), runs out of
// p.TotalTimeout (if not 0), or ctx ends. Each attempt gets a ctx bounded
// by p.AttemptTimeout (if not 0); between attempts Do waits
// Delay(p, retry, code of the failure, jitter), and stops waiting as soon
// as ctx ends. op is not called once ctx has ended. ABORTED failures are
// retried past MaxRetries for p.ContentionWait (see Policy), and
// RESOURCE_EXHAUSTED ones until p.TotalTimeout, when it is set, each wait
// as long as the last counted retry's: a store that asks for less traffic
// is not failing, and a push-back that ends within the total timeout costs
// time, not the operation.
//
// On failure the error says how many attempts were made and wraps op's last
// error, without the Permanent marker: errors.Is, errors.As and status.Code
// see through it. When ctx or the total timeout ended the run, the error
// also wraps context.Cause of that context. An invalid policy is returned
// as an error without calling op.
func Do(ctx context.Context, p Policy, op func(ctx context.Context) error, opts ...Option) (Stats, error) {
	start := time.Now()
	var st Stats
	if err := p.Validate(); err != nil {
		return st, err
	}
	if ctx.Err() != nil {
		st.Elapsed = time.Since(start)
		return st, fmt.Errorf("not attempted: %w", context.Cause(ctx))
	}
	// Firestore's rules, after the caller's options so that they hold: a
	// result nobody waits for past TotalTimeout, ABORTED after the
	// transaction itself waited on the contended documents, and
	// RESOURCE_EXHAUSTED as push-back.
	opts = append(slices.Clip(opts), policy.CancelAtTotalTimeout(), policy.ContentionInAttempts(),
		policy.WithClassify(func(err error) policy.Failure { _, code := Classify(err); return failure(code) }))
	n, err := policy.Retry(ctx, p, func(ctx context.Context) error {
		err := op(ctx)
		retryable, code := Classify(err)
		st.LastCode = code
		if err != nil && !retryable {
			return backoff.Permanent(err)
		}
		return err
	}, opts...)
	st.Attempts, st.Retries, st.Elapsed = n, max(n-1, 0), time.Since(start)
	switch {
	case err == nil:
		return st, nil
	case n == 0:
		return st, fmt.Errorf("not attempted: %w", err)
	}
	return st, fmt.Errorf("after %s: %w", plural.N(n, "attempt"), err)
}
