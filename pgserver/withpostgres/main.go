// Command withpostgres runs a command with a throwaway PostgreSQL cluster:
// it starts one on a free loopback port, exports its DSN to the command as
// SNAPWRITER_TEST_POSTGRES_DSN, and stops and deletes the cluster when the
// command ends, passing on its exit code. `make test` and `make bench` use
// it so that every package's tests share one cluster.
//
//	go run ./pgserver/withpostgres [--durable] -- go test ./...
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/snapwriter/snapwriter/internal/harness"
	"github.com/snapwriter/snapwriter/pgserver"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	opts := []pgserver.Option{pgserver.WithoutReuse()}
	if len(args) > 0 && args[0] == "--durable" {
		opts = append(opts, pgserver.Durable())
		args = args[1:]
	}
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: withpostgres [--durable] [--] command [args...]")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	start := time.Now()
	srv, err := pgserver.Start(ctx, opts...)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "withpostgres:", err)
		return 1
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "withpostgres:", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "withpostgres: PostgreSQL ready (%.1fs)\n", time.Since(start).Seconds())

	return harness.RunChild("withpostgres", args, pgserver.DSNEnv+"="+srv.DSN)
}
