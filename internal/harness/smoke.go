package harness

import (
	"strings"
	"sync"
	"testing"
)

// The fast tier. `go test -short` (make test-short) runs the pure-logic
// tests and a few smoke tests against the servers; every other test that
// reaches a server through its harness (an emulator project or client, a
// PostgreSQL pool, tables or database) is skipped there, at the first such
// call, by SkipUnlessSmoke. Without -short, as in `make test`, none of
// this does anything.

// smoke holds the names of the tests marked by MarkSmoke in this test
// binary.
var smoke sync.Map

// MarkSmoke makes t, and the subtests it runs, a smoke test: one of the
// few server-backed tests that -short mode still runs. Call it first thing
// in the test.
func MarkSmoke(t testing.TB) {
	if testing.Short() {
		smoke.Store(t.Name(), true)
	}
}

// IsSmoke reports whether t, or a test t runs in, was marked by MarkSmoke.
func IsSmoke(t testing.TB) bool {
	name := t.Name()
	for {
		if _, ok := smoke.Load(name); ok {
			return true
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return false
		}
		name = name[:i]
	}
}

// SkipUnlessSmoke skips t in -short mode unless it is a smoke test. A
// harness calls it wherever a test reaches its server; server names the
// server ("the Firestore emulator"). It must be called from the test's own
// goroutine, as t.Skip must.
func SkipUnlessSmoke(t testing.TB, server string) {
	if !testing.Short() || IsSmoke(t) {
		return
	}
	t.Helper()
	t.Skipf("uses %s: skipped in -short mode (make test-short), where only smoke tests (emulator.Smoke, pgserver.Smoke) reach a server", server)
}
