package faultproxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"
)

// listen listens on a free loopback port until t ends.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

// echoServer echoes every connection's bytes back until the client closes.
func echoServer(t *testing.T) string {
	t.Helper()
	ln := listen(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// echoed dials p and proves the connection works with one echoed line.
func echoed(t *testing.T, p *Proxy, line string) net.Conn {
	t.Helper()
	c := dial(t, p)
	if _, err := roundTrip(c, bufio.NewReader(c), line, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	return c
}

// roundTrip writes a line and reads it back, failing after within.
func roundTrip(c net.Conn, r *bufio.Reader, line string, within time.Duration) (time.Duration, error) {
	t0 := time.Now()
	_ = c.SetDeadline(t0.Add(within))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return 0, err
	}
	got, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if got != line+"\n" {
		return 0, errors.New("echo returned " + got)
	}
	return time.Since(t0), nil
}

// waitFor polls cond until it holds or within has passed, and reports
// whether it held: the proxy's counters move on its own goroutines.
func waitFor(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

func TestForwardsAndCounts(t *testing.T) {
	t.Parallel()
	p := newProxy(t, echoServer(t))
	c := dial(t, p)
	r := bufio.NewReader(c)
	for range 10 {
		if _, err := roundTrip(c, r, "hello", 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// Many connections at once, each with its own bytes.
	done := make(chan error, 8)
	for i := range 8 {
		go func() {
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				done <- err
				return
			}
			defer c.Close()
			_, err = roundTrip(c, bufio.NewReader(c), string(rune('a'+i)), 5*time.Second)
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// The counters move just after the bytes are handed on.
	waitFor(2*time.Second, func() bool { s := p.Stats(); return s.BytesUp >= 76 && s.BytesDown >= 76 })
	if s := p.Stats(); s.Connections != 9 || s.Resets != 0 || s.BytesUp != 60+16 || s.BytesDown != 60+16 {
		t.Errorf("stats %+v; want 9 connections, 0 resets, 76 bytes each way", s)
	}
}

// A client's half close reaches the server, and the server's answer still
// comes back after it.
func TestHalfClose(t *testing.T) {
	t.Parallel()
	p := newProxy(t, echoServer(t))
	c := dial(t, p)
	if _, err := c.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "last words" {
		t.Fatalf("read %q, %v", got, err)
	}
}

// An echo through the proxy takes at least the round trip it adds: no byte
// is forwarded early. (How much later is up to the host's timer slack.)
// And latency does not cap throughput: many lines in flight at once take
// about one round trip, not one each. A delay proxy on real sockets must be
// measured on the real clock (synctest cannot fake network I/O).
func TestLatency(t *testing.T) {
	t.Parallel()
	p := newProxy(t, echoServer(t))
	const oneWay = time.Millisecond
	p.SetLatency(oneWay)
	c := dial(t, p)
	r := bufio.NewReader(c)
	var rtts []time.Duration
	for range 50 {
		d, err := roundTrip(c, r, "ping", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		rtts = append(rtts, d)
	}
	slices.Sort(rtts)
	t.Logf("1 ms each way: fastest %s, median %s", rtts[0], rtts[len(rtts)/2])
	if rtts[0] < 2*oneWay {
		t.Errorf("fastest round trip %s; want at least the %s the proxy adds", rtts[0], 2*oneWay)
	}

	const slow = 100 * time.Millisecond
	p.SetLatency(slow)
	t0 := time.Now()
	const n = 50
	go func() {
		for range n {
			_, _ = io.WriteString(c, "pipelined\n")
			// Spaced on the real clock so each line is a chunk of its own.
			time.Sleep(time.Millisecond)
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := range n {
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
	}
	took := time.Since(t0)
	t.Logf("%d pipelined lines at 100 ms each way: %s", n, took)
	if took < 2*slow || took > 2*slow+n*time.Millisecond+time.Second {
		t.Errorf("%d pipelined lines took %s; want about one round trip (%s) plus the sending time", n, took, 2*slow)
	}
}

// A black hole forwards nothing and closes nothing, on live and new
// connections; when it ends, what was held arrives, in order.
func TestBlackhole(t *testing.T) {
	t.Parallel()
	p := newProxy(t, echoServer(t))
	live := dial(t, p)
	lr := bufio.NewReader(live)
	if _, err := roundTrip(live, lr, "before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	for _, line := range []string{"one", "two", "three"} {
		if _, err := io.WriteString(live, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	fresh := dial(t, p) // accepted even now
	fr := bufio.NewReader(fresh)
	if _, err := io.WriteString(fresh, "new\n"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []net.Conn{live, fresh} {
		_ = c.SetReadDeadline(time.Now().Add(700 * time.Millisecond))
	}
	if b, err := lr.ReadByte(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("live connection read %q, %v during the black hole; want nothing until the deadline", b, err)
	}
	if b, err := fr.ReadByte(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("new connection read %q, %v during the black hole; want nothing until the deadline", b, err)
	}
	if s := p.Stats(); s.Resets != 0 || s.Connections != 2 {
		t.Errorf("stats during the black hole %+v", s)
	}
	p.Blackhole(true) // idempotent
	p.Blackhole(false)
	for _, c := range []net.Conn{live, fresh} {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	}
	for _, want := range []string{"one", "two", "three"} {
		got, err := lr.ReadString('\n')
		if err != nil || got != want+"\n" {
			t.Fatalf("after the black hole read %q, %v; want %q", got, err, want)
		}
	}
	if got, err := fr.ReadString('\n'); err != nil || got != "new\n" {
		t.Fatalf("new connection after the black hole read %q, %v", got, err)
	}
	p.Blackhole(false) // idempotent
	if _, err := roundTrip(live, lr, "after", 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

// readErr reads from c until an error (bounded by 5 s).
func readErr(c net.Conn) error {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, c)
	if err == nil {
		return io.EOF
	}
	return err
}

func TestResetAll(t *testing.T) {
	t.Parallel()
	p := newProxy(t, echoServer(t))
	var cs []net.Conn
	for range 3 {
		cs = append(cs, echoed(t, p, "x"))
	}
	p.ResetAll()
	for i, c := range cs {
		if err := readErr(c); !isReset(err) {
			t.Errorf("connection %d: %v; want ECONNRESET", i, err)
		}
	}
	if s := p.Stats(); s.Resets != 3 {
		t.Errorf("Resets = %d, want 3", s.Resets)
	}
	echoed(t, p, "again") // new connections still work
}

// The server side gets the reset too, not only the client.
func TestResetReachesServer(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	serverErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			serverErr <- err
			return
		}
		defer c.Close()
		serverErr <- readErr(c)
	}()
	p := newProxy(t, ln.Addr().String())
	c := dial(t, p)
	if _, err := c.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool { return p.Stats().BytesUp >= 2 }) {
		t.Fatal("the server never got the bytes")
	}
	p.ResetAll()
	if err := <-serverErr; !isReset(err) {
		t.Errorf("server saw %v; want ECONNRESET", err)
	}
}

func TestResetRate(t *testing.T) {
	t.Parallel()
	p := newProxy(t, echoServer(t))
	p.SetResetRate(1)
	c := echoed(t, p, "x")
	t0 := time.Now()
	if err := readErr(c); !isReset(err) {
		t.Fatalf("%v; want ECONNRESET within a second or two", err)
	}
	t.Logf("reset after %s", time.Since(t0))
	p.SetResetRate(0)
	c = dial(t, p)
	r := bufio.NewReader(c)
	if _, err := roundTrip(c, r, "calm", 5*time.Second); err != nil {
		t.Fatalf("rate 0: %v", err)
	}
	// The resetter ticks each second on the real clock: outlive a tick.
	time.Sleep(1200 * time.Millisecond)
	if _, err := roundTrip(c, r, "calm", 5*time.Second); err != nil {
		t.Fatalf("rate 0, after a resetter tick: %v", err)
	}
	if s := p.Stats(); s.Resets != 1 {
		t.Errorf("Resets = %d, want 1", s.Resets)
	}
}

func TestRefuse(t *testing.T) {
	t.Parallel()
	p := newProxy(t, echoServer(t))
	live := echoed(t, p, "x")
	p.Refuse(true)
	if err := readErr(live); !isReset(err) {
		t.Errorf("live connection: %v; want ECONNRESET", err)
	}
	for i := range 3 {
		if err := dialAndRead(p); !isReset(err) {
			t.Errorf("new connection %d: %v; want ECONNRESET", i, err)
		}
	}
	if s := p.Stats(); s.Resets != 4 || s.Connections != 4 {
		t.Errorf("stats %+v; want 4 connections, 4 resets", s)
	}
	p.Refuse(false)
	echoed(t, p, "back")
}

// A target that is down: the client's connection is reset.
func TestTargetDown(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	addr := ln.Addr().String()
	_ = ln.Close()
	p := newProxy(t, addr)
	for p.Addr() == addr { // the freed port may come straight back
		p = newProxy(t, addr)
	}
	if err := dialAndRead(p); !isReset(err) {
		t.Errorf("%v; want ECONNRESET", err)
	}
}

// dialAndRead connects through p and reads until an error. The proxy
// accepts, then resets: on loopback the reset can come so fast that the
// dial itself reports it.
func dialAndRead(p *Proxy) error {
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		return err
	}
	defer c.Close()
	return readErr(c)
}

// Close ends every connection and returns; calls after it do nothing.
func TestClose(t *testing.T) {
	t.Parallel()
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write(bytes.Repeat([]byte("x"), 1<<20))
	done := make(chan struct{})
	go func() { p.Close(); p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs with a connection held in a black hole")
	}
	if err := readErr(c); err == nil {
		t.Error("connection still open after Close")
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Error("still accepting after Close")
	}
}

// frame is an HTTP/2 frame of type typ on stream 1 carrying payload.
func frame(typ byte, payload string) []byte {
	n := len(payload)
	return append([]byte{byte(n >> 16), byte(n >> 8), byte(n), typ, 0, 0, 0, 0, 1}, payload...)
}

// HoldUp withholds the first matching DATA frame and everything after it
// on that connection, delivers everything before it (also when frames
// arrive a byte at a time), leaves other connections alone, and fires
// once.
func TestHoldUp(t *testing.T) {
	for _, split := range []bool{false, true} {
		name := "whole writes"
		if split {
			name = "a byte at a time"
		}
		t.Run(name, func(t *testing.T) {
			addr := echoServer(t)
			p := newProxy(t, addr)
			held := p.HoldUp(func(data []byte) bool { return bytes.Contains(data, []byte("commit")) })
			const headers = 1
			before := slices.Concat(http2Preface, frame(4, ""), frame(headers, "hdr"), frame(0, "read"))
			stream := slices.Concat(before, frame(0, "the commit"), frame(0, "after"))
			c := dial(t, p)
			if split {
				for _, b := range stream {
					if _, err := c.Write([]byte{b}); err != nil {
						t.Fatal(err)
					}
				}
			} else if _, err := c.Write(stream); err != nil {
				t.Fatal(err)
			}
			select {
			case <-held:
			case <-time.After(5 * time.Second):
				t.Fatal("the matching frame was not held")
			}
			got := make([]byte, len(before))
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, before) {
				t.Fatalf("echoed %q, %v; want everything before the held frame, %q", got, err, before)
			}
			// Nothing more arrives: the held frame and the one after it
			// were never delivered.
			_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if n, err := c.Read(make([]byte, 64)); n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("read %d bytes (%v) after the held frame", n, err)
			}
			// One-shot: a second connection sending the same passes.
			c2 := dial(t, p)
			if _, err := c2.Write(stream); err != nil {
				t.Fatal(err)
			}
			got = make([]byte, len(stream))
			_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(c2, got); err != nil || !bytes.Equal(got, stream) {
				t.Fatalf("second connection echoed %q, %v; want all of it", got, err)
			}
		})
	}
	// A connection that is not HTTP/2 is never scanned.
	p := newProxy(t, echoServer(t))
	p.HoldUp(func([]byte) bool { return true })
	echoed(t, p, "plain commit line")
}
