package firestorelock

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/backendkit"
)

// A fence past the warning threshold is logged (as SyncGuard's backends must),
// by key hash only; fences below it are not.
func TestFenceWarning(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.WarnLevel)
	b, c := newBackend(t, WithLogger(zap.New(core)))
	ctx := context.Background()
	seed := func(key string, n uint64) {
		f, err := backendkit.FormatFence(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Collection(DefaultFenceCollection).Doc("fence:"+key).Set(ctx, map[string]any{fieldFence: f, fieldKeyDebug: key}); err != nil {
			t.Fatal(err)
		}
	}
	seed("warn:below", backendkit.FenceWarnThreshold-1) // next fence is exactly the threshold: no warning
	seed("warn:above", backendkit.FenceWarnThreshold)   // next fence is past it

	if r := mustAcquire(t, b, "warn:below", locking.DefaultTTL); backendkit.FenceNeedsWarning(r.Fence) {
		t.Fatalf("fence %s needs a warning", r.Fence)
	}
	if n := logs.Len(); n != 0 {
		t.Fatalf("%d warnings for a fence at the threshold: %v", n, logs.All())
	}
	r := mustAcquire(t, b, "warn:above", locking.DefaultTTL)
	entries := logs.All()
	if len(entries) != 1 {
		t.Fatalf("%d warnings for fence %s, want 1", len(entries), r.Fence)
	}
	fields := entries[0].ContextMap()
	if fields["fence"] != r.Fence || fields["keyHash"] != locking.HashKey("warn:above") {
		t.Errorf("warning fields %v", fields)
	}
	for k, v := range fields {
		if s, ok := v.(string); ok && strings.Contains(s, "warn:above") {
			t.Errorf("warning field %s carries the raw key", k)
		}
	}
	if _, err := New(c, WithLogger(nil)); err == nil {
		t.Error("New accepted a nil logger")
	}
}
