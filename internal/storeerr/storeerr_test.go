package storeerr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/snapshot"
)

func TestUnreachable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		err      error
		timedOut bool
		want     bool
	}{
		{"nil", nil, false, false},
		{"other", errors.New("x"), false, false},
		{"deadline", fmt.Errorf("reading: %w", context.DeadlineExceeded), true, true},
		{"snapshot timeout", &snapshot.Error{ID: "d", Err: fmt.Errorf("%w: %w", snapshot.ErrTimeout, errors.New("x"))}, true, true},
		{"lock network timeout", &locking.Error{Code: locking.NetworkTimeout, Op: "acquire", Err: errors.New("x")}, true, true},
		{"grpc deadline", status.Error(codes.DeadlineExceeded, "x"), true, true},
		{"lock unavailable", &locking.Error{Code: locking.ServiceUnavailable, Op: "acquire", Err: errors.New("x")}, false, true},
		{"grpc unavailable", status.Error(codes.Unavailable, "connection refused"), false, true},
		// A signal is neither, even when it ended a wait on a deadline too.
		{"canceled", fmt.Errorf("x: %w", context.Canceled), false, false},
		{"canceled deadline", errors.Join(context.Canceled, context.DeadlineExceeded), true, false},
	}
	for _, tc := range cases {
		if got := Unreachable(tc.err); got != tc.want {
			t.Errorf("%s: Unreachable = %v, want %v", tc.name, got, tc.want)
		}
		if got := timedOut(tc.err); got != tc.timedOut {
			t.Errorf("%s: timedOut = %v, want %v", tc.name, got, tc.timedOut)
		}
	}
}

func TestWrap(t *testing.T) {
	t.Parallel()
	const ep = "the Firestore emulator at 127.0.0.1:8080"
	timeout := fmt.Errorf("listing snapshots: %w", context.DeadlineExceeded)
	refused := fmt.Errorf("connecting to Firestore: %w", status.Error(codes.Unavailable, "connection refused"))
	cases := []struct {
		name string
		err  error
		u    UnreachableError
		want string // "" for err returned as it is
	}{
		{"within", timeout, UnreachableError{Endpoint: ep, Within: "2s (--timeout)"},
			"no answer from " + ep + " within 2s (--timeout): listing snapshots: context deadline exceeded"},
		{"what", timeout, UnreachableError{Endpoint: ep, What: "the lock's renewals", Within: "before the lock expired (--lock-ttl 5s)"},
			"no answer from " + ep + " to the lock's renewals before the lock expired (--lock-ttl 5s): listing snapshots: context deadline exceeded"},
		{"refused", refused, UnreachableError{Endpoint: ep, What: "the write", Within: "in time"},
			ep + " is unreachable: connecting to Firestore: rpc error: code = Unavailable desc = connection refused"},
		{"other", errors.New("x"), UnreachableError{Endpoint: ep, Within: "2s"}, ""},
		{"canceled", context.Canceled, UnreachableError{Endpoint: ep, Within: "2s"}, ""},
		{"nil", nil, UnreachableError{Endpoint: ep, Within: "2s"}, ""},
	}
	for _, tc := range cases {
		got := Wrap(tc.err, tc.u)
		if tc.want == "" {
			if got != tc.err {
				t.Errorf("%s: Wrap = %v, want it as it was", tc.name, got)
			}
			continue
		}
		var u *UnreachableError
		if !errors.As(got, &u) || got.Error() != tc.want {
			t.Errorf("%s: Wrap = %q, want %q", tc.name, got, tc.want)
			continue
		}
		if !errors.Is(got, tc.err) || u.Err != tc.err {
			t.Errorf("%s: %v does not wrap %v", tc.name, got, tc.err)
		}
		if u.Summary()+": "+tc.err.Error() != tc.want {
			t.Errorf("%s: Summary = %q", tc.name, u.Summary())
		}
		// An error that names its store keeps the first name.
		if again := Wrap(got, UnreachableError{Endpoint: "elsewhere", Within: "1s"}); again != got {
			t.Errorf("%s: named twice: %v", tc.name, again)
		}
	}
	// Wrap leaves the caller's u as it was.
	u := UnreachableError{Endpoint: ep, What: "w", Within: "1s"}
	_ = Wrap(refused, u)
	if u.What != "w" || u.Within != "1s" || u.Err != nil {
		t.Errorf("Wrap changed its argument: %+v", u)
	}
}

func TestFirestoreEndpoint(t *testing.T) {
	t.Parallel()
	cases := []struct{ host, project, database, want string }{
		{"127.0.0.1:8080", "p", "(default)", "the Firestore emulator at 127.0.0.1:8080"},
		{"", "p", "(default)", "Firestore at firestore.googleapis.com:443 (database (default), project p)"},
		{"", "", "snaps", "Firestore at firestore.googleapis.com:443 (database snaps)"},
	}
	for _, tc := range cases {
		if got := FirestoreEndpoint(tc.host, tc.project, tc.database); got != tc.want {
			t.Errorf("FirestoreEndpoint(%q, %q, %q) = %q, want %q", tc.host, tc.project, tc.database, got, tc.want)
		}
	}
}
