package fsproxy

import "testing"

// Start starts a proxy in front of target with cfg for a test, a chaos
// scenario or a benchmark, and closes it when tb ends.
func Start(tb testing.TB, target string, cfg Config) *Proxy {
	tb.Helper()
	p, err := New(target, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}
