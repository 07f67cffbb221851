// Command maxrss runs a command and prints its peak resident set size, in
// kilobytes, on the last line of its standard error, as "maxrss KB", then
// exits with the command's exit code; like GNU time's %M, without the
// package.
//
// A benchmark cannot read a child's peak RSS itself: Linux carries the
// memory high-water mark of the process that execs across the exec, and
// Go starts children sharing the parent's memory, so every child of a
// large benchmark process would report the benchmark's own RSS. This
// small process starts the command instead and reports its rusage.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: maxrss COMMAND [ARG…]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		fmt.Fprintln(os.Stderr, "maxrss:", err)
		os.Exit(1)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		fmt.Fprintf(os.Stderr, "maxrss %d\n", ru.Maxrss) // kilobytes on Linux
	}
	os.Exit(cmd.ProcessState.ExitCode())
}
