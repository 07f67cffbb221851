// Package harness holds what the test-server harnesses (emulator,
// pgserver) and their "run a command with a server" tools share.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// startTimeout bounds how long Main waits for its server: a cold JVM or
// initdb on a loaded machine takes a while, but not minutes.
const startTimeout = 2 * time.Minute

// Server is a server Main has started.
type Server struct {
	// Ready is what the ready line on stderr says, such as "PostgreSQL
	// ready".
	Ready string
	// Env (NAME=value) hands the server to the command.
	Env string
	// Stop stops the server once the command has ended.
	Stop func() error
}

// Main is the whole of a tool that runs a command with a server
// (withemulator, withpostgres), so the tools differ only in their server.
// args are the command, after an optional "--". Main starts the server with
// start, bounded by two minutes, says on stderr that it is ready and how
// long that took, runs the command with the server's Env added (stdio passed
// through, SIGINT and SIGTERM forwarded), stops the server and returns the
// command's exit code: 2 (with usage) when there is no command, 1 when the
// server did not start. Messages are prefixed with tool.
func Main(tool, usage string, args []string, start func(ctx context.Context) (Server, error)) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage:", usage)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	began := time.Now()
	srv, err := start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", tool, err)
		return 1
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", tool, err)
		}
	}()
	fmt.Fprintf(os.Stderr, "%s: %s (%.1fs)\n", tool, srv.Ready, time.Since(began).Seconds())
	return runChild(tool, args, srv.Env)
}

// FreePort returns a TCP port free on the loopback interface right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ErrPortTaken is PortFree's error for a port something already listens on.
var ErrPortTaken = errors.New("port in use")

// PortFree reports whether port is free on the loopback interface right
// now: nil, or an error matching ErrPortTaken (or why it could not tell).
func PortFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return ErrPortTaken
		}
		return err
	}
	return l.Close()
}

// Serve is the whole of a tool that keeps a server running in the
// foreground for a person (`make emulator`): it starts the server with
// start, bounded by two minutes, prints on out that it is ready and the
// export lines that hand it to another shell — the server's Env, then
// also (NAME=value each) — and stops it when ctx ends (the tool cancels
// ctx on SIGINT or SIGTERM). It returns 0 once the server is stopped, 1
// when it did not start or did not stop cleanly.
func Serve(ctx context.Context, tool string, out io.Writer, start func(ctx context.Context) (Server, error), also ...string) int {
	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	began := time.Now()
	srv, err := start(sctx)
	cancel()
	if err != nil {
		fmt.Fprintf(out, "%s: %v\n", tool, err)
		return 1
	}
	fmt.Fprintf(out, "%s: %s (%.1fs); it runs until Ctrl-C. In another shell:\n", tool, srv.Ready, time.Since(began).Seconds())
	for _, kv := range append([]string{srv.Env}, also...) {
		fmt.Fprintf(out, "  export %s\n", kv)
	}
	<-ctx.Done()
	fmt.Fprintf(out, "%s: stopping\n", tool)
	if err := srv.Stop(); err != nil {
		fmt.Fprintf(out, "%s: %v\n", tool, err)
		return 1
	}
	return 0
}

// Tail is the last n bytes of s, marked as cut when it is.
func Tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// runChild runs args with this process's stdio and env plus extraEnv,
// forwarding SIGINT and SIGTERM to it, and returns its exit code (1 if it
// could not run; the reason goes to stderr, prefixed with tool).
func runChild(tool string, args []string, extraEnv ...string) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), extraEnv...)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", tool, err)
		return 1
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-sig:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", tool, err)
		return 1
	}
}
