//go:build snapwriter_testhooks

package main

import (
	"os"

	"github.com/spf13/cobra"
)

// installTestHooks, in a binary built only for tests (-tags
// snapwriter_testhooks; never the product's), makes the command that
// SNAPWRITER_TESTHOOK_PANIC names panic as it starts: the panic test of
// the built binary (ending_test.go).
func installTestHooks(a *app) {
	name, ok := os.LookupEnv("SNAPWRITER_TESTHOOK_PANIC")
	if !ok {
		return
	}
	a.beforeRun = func(cmd *cobra.Command) {
		if cmd.Name() == name {
			panic("test hook: " + name + " panics")
		}
	}
}
