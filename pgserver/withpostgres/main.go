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
	"os"

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
	return harness.Main("withpostgres", "withpostgres [--durable] [--] command [args...]", args,
		func(ctx context.Context) (harness.Server, error) {
			srv, err := pgserver.Start(ctx, opts...)
			if err != nil {
				return harness.Server{}, err
			}
			return harness.Server{Ready: "PostgreSQL ready", Env: pgserver.DSNEnv + "=" + srv.DSN, Stop: srv.Stop}, nil
		})
}
