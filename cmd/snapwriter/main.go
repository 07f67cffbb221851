// Command snapwriter writes daily district-statistics snapshots into Cloud
// Firestore under a fenced lock: root document first, then the districts in
// chunked, retried, fence-checked transactions, then a manifest that records
// any partial failure.
//
// Exit codes: 0 complete, 1 runtime failure, 2 usage or invalid input
// (nothing written), 3 partial (the manifest records the failures), 4 lock
// held by another writer, 5 fenced out (lost the lock mid-write).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := newApp(os.Stdin, os.Stdout, os.Stderr, os.LookupEnv).run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
