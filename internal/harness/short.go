package harness

import "testing"

// The fast tier. `go test -short` (make test-short) starts no server: the
// harnesses' Main functions start none in -short mode, and every test that
// reaches one is skipped there, at the first harness call that would reach
// it (an emulator project or client, a PostgreSQL pool, tables or
// database, the built binary), by SkipShort. Without -short, as in
// `make test`, none of this does anything.

// SkipShort skips t in -short mode, where no server is started. A harness
// calls it wherever a test reaches its server; server names the server
// ("the Firestore emulator"). It must be called from the test's own
// goroutine, as t.Skip must.
func SkipShort(t testing.TB, server string) {
	if !testing.Short() {
		return
	}
	t.Helper()
	t.Skipf("uses %s: skipped in -short mode (make test-short starts no server)", server)
}
