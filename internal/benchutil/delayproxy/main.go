// Command delayproxy forwards TCP connections to a target, holding every
// chunk of bytes for half a round trip each way (internal/faultproxy). The
// write benchmark runs it as a separate process so that the proxy's CPU is
// not counted as the client's. It prints its listening address on the
// first line of stdout and runs until stdin is closed or it is signalled.
//
//	delayproxy -target 127.0.0.1:8080 -rtt 10ms
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/snapwriter/snapwriter/internal/faultproxy"
)

func main() {
	target := flag.String("target", "", "host:port to forward to (required)")
	rtt := flag.Duration("rtt", 0, "round trip to add: half of it each way")
	flag.Parse()
	if *target == "" {
		fmt.Fprintln(os.Stderr, "delayproxy: -target is required")
		os.Exit(2)
	}
	p, err := faultproxy.New(*target)
	if err != nil {
		fmt.Fprintln(os.Stderr, "delayproxy:", err)
		os.Exit(1)
	}
	defer p.Close()
	p.SetLatency(*rtt / 2)
	fmt.Println(p.Addr())

	done := make(chan struct{})
	go func() {
		// The parent holds stdin open while it needs the proxy.
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-done:
	case <-sig:
	}
}
