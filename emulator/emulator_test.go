package emulator

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/internal/harness"
)

var emu *Emulator

func TestMain(m *testing.M) { os.Exit(Main(m, &emu)) }

func TestWriteReadReset(t *testing.T) {
	ctx := context.Background()
	project := ProjectID(t)
	c := emu.TestClientFor(t, project)
	ref := c.Collection("c").Doc("d")
	if _, err := ref.Set(ctx, map[string]any{"n": int64(7)}); err != nil {
		t.Fatal(err)
	}
	snap, err := ref.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Data()["n"]; got != int64(7) {
		t.Fatalf("n = %v (%T), want int64 7", got, got)
	}
	if err := emu.Reset(ctx, project); err != nil {
		t.Fatal(err)
	}
	if _, err := ref.Get(ctx); status.Code(err) != codes.NotFound {
		t.Fatalf("after reset: err = %v, want NotFound", err)
	}
}

func TestInterceptorInjectsFaults(t *testing.T) {
	ctx := context.Background()
	fail := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		// PermissionDenied: the client retries UNAVAILABLE on Commit by itself, so it would hide the fault.
		return status.Error(codes.PermissionDenied, "injected")
	}
	c := emu.TestClient(t, fail)
	_, err := c.Collection("c").Doc("d").Set(ctx, map[string]any{"x": 1})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("err = %v, want injected PermissionDenied", err)
	}
}

// WithPort starts the emulator on the port asked for (`make emulator`'s
// predictable address), and refuses a taken port at once instead of
// waiting for an emulator that cannot bind it.
func TestStartWithPort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an emulator of its own: skipped in -short mode")
	}
	t.Parallel()
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e, err := Start(ctx, WithoutReuse(), WithPort(port))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	if want := "127.0.0.1:" + strconv.Itoa(port); e.Host != want {
		t.Errorf("Host = %s; want %s", e.Host, want)
	}
	if _, err := Start(ctx, WithoutReuse(), WithPort(port)); !errors.Is(err, harness.ErrPortTaken) {
		t.Errorf("Start on the taken port %d = %v; want harness.ErrPortTaken", port, err)
	}
	// Its JVM logs its pauses where Pauses reads them; a reused one has
	// no log of ours.
	if _, err := e.Pauses(); err != nil {
		t.Errorf("Pauses of an emulator Start launched: %v", err)
	}
	if _, err := (&Emulator{Host: e.Host}).Pauses(); err == nil {
		t.Error("Pauses of an emulator started elsewhere: no error")
	}
}
