//go:build !snapwriter_testhooks

package main

// installTestHooks does nothing in the product: the hooks exist only in a
// binary built with -tags snapwriter_testhooks (testhooks_on.go), for the
// tests that need a misbehaving binary.
func installTestHooks(*app) {}
