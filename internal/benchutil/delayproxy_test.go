package benchutil

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// An echo through the proxy takes at least the round trip it adds: no byte
// is forwarded early. (How much later is up to the host's timer slack,
// which the benchmarks measure and report rather than assume.)
func TestDelayProxyRoundTrip(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			if _, err := c.Write(line); err != nil {
				return
			}
		}
	}()
	const oneWay = time.Millisecond
	p, err := NewDelayProxy(ln.Addr().String(), oneWay)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	var rtts []time.Duration
	for range 50 {
		t0 := time.Now()
		if _, err := c.Write([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := r.ReadBytes('\n'); err != nil {
			t.Fatal(err)
		}
		rtts = append(rtts, time.Since(t0))
	}
	t.Logf("p50 %.3f ms", PercentileMs(rtts, 50))
	if m := PercentileMs(rtts, 0); m < 2 {
		t.Errorf("fastest round trip %.3f ms; want at least the 2 ms the proxy adds", m)
	}
}
