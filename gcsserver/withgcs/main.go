// Command withgcs runs a command with a Cloud Storage API server
// (gcsserver): it starts one on a free loopback port, creates the buckets
// named by --bucket, exports STORAGE_EMULATOR_HOST to the command, and
// stops the server when the command ends, passing on its exit code.
// `make demo-gcs` uses it.
//
//	go run ./gcsserver/withgcs --bucket demo -- bash scripts/demo-gcs.sh
package main

import (
	"context"
	"os"
	"strings"

	"github.com/snapwriter/snapwriter/gcsserver"
	"github.com/snapwriter/snapwriter/internal/harness"
)

func main() {
	args := os.Args[1:]
	var buckets []string
	for len(args) >= 2 && args[0] == "--bucket" {
		buckets = append(buckets, strings.Split(args[1], ",")...)
		args = args[2:]
	}
	os.Exit(harness.Main("withgcs", "withgcs [--bucket NAME]... [--] command [args...]", args, func(context.Context) (harness.Server, error) {
		srv, err := gcsserver.Start(0)
		if err != nil {
			return harness.Server{}, err
		}
		for _, b := range buckets {
			srv.CreateBucket(b)
		}
		return harness.Server{
			Ready: "Cloud Storage server ready on " + srv.Host,
			Env:   gcsserver.HostEnv + "=" + srv.Host,
			Stop:  func() error { srv.Stop(); return nil },
		}, nil
	}))
}
