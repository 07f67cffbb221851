package backendkit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/locking"
)

func TestOpErrors(t *testing.T) {
	e := OpErrors{Op: "acquire", KeyHash: "kh", Secrets: []string{"raw-key"},
		Classify: func(context.Context, error) locking.Code { return locking.ServiceUnavailable }}
	ctx := context.Background()

	storage := errors.New(`unavailable: document "locks/raw-key"`)
	err := e.Map(ctx, storage)
	var le *locking.Error
	if !errors.As(err, &le) || le.Code != locking.ServiceUnavailable || le.Op != "acquire" || le.KeyHash != "kh" {
		t.Fatalf("Map(storage error) = %#v", err)
	}
	if !errors.Is(err, storage) || strings.Contains(err.Error(), "raw-key") {
		t.Errorf("Map(storage error) = %q: want it scrubbed and still wrapping the original", err)
	}

	own := fmt.Errorf("in tx: %w", &locking.Error{Code: locking.Internal, LockIDHash: "ih", Err: errors.New("fence at maximum")})
	if !errors.As(e.Map(ctx, own), &le) || le.Code != locking.Internal || le.Op != "acquire" || le.KeyHash != "kh" || le.LockIDHash != "ih" {
		t.Errorf("Map(own error) = %#v; want its code kept and this op's name and hashes added", le)
	}
	if !errors.As((&OpErrors{Op: "x"}).Map(ctx, storage), &le) || le.Code != locking.Internal {
		t.Errorf("Map without Classify: %v; want locking.Internal", le.Code)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := e.Ended(cancelled); !errors.Is(err, locking.ErrAborted) {
		t.Errorf("Ended(cancelled) = %v; want Aborted", err)
	}
	expired, cancel2 := context.WithTimeout(ctx, 0)
	defer cancel2()
	<-expired.Done()
	if err := e.Ended(expired); !errors.Is(err, locking.ErrNetworkTimeout) {
		t.Errorf("Ended(expired) = %v; want NetworkTimeout", err)
	}
}
