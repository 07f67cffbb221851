// Package faultproxy is an in-process TCP proxy that injects network
// faults between a client and a server on loopback: latency, a black hole
// (a partition that holds every byte and delivers it when it heals),
// connection resets (RST on both sides) at random or on demand, and
// refused connections. Tests and benchmarks point a client at Addr instead
// of the server; only tests import it.
//
//	p, err := faultproxy.New(emu.Host)
//	defer p.Close()
//	p.SetLatency(50 * time.Millisecond) // 100 ms round trip
//	p.Blackhole(true)                   // partition: nothing flows, nothing is closed
//	p.Blackhole(false)                  // healed: held bytes are delivered, in order
//	p.ResetAll()                        // every live connection gets an RST
package faultproxy

import (
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Stats counts what went through a proxy since New.
type Stats struct {
	// Connections accepted from clients (refused ones included).
	Connections int64
	// Resets: connections reset by the proxy (ResetAll, SetResetRate,
	// Refuse, or a server that could not be reached).
	Resets int64
	// BytesUp were delivered to the server, BytesDown to clients.
	BytesUp, BytesDown int64
}

// Proxy forwards TCP connections from a loopback listener to a target,
// applying the faults currently set. Its methods are safe for concurrent
// use.
type Proxy struct {
	ln     net.Listener
	target string

	latency   atomic.Int64  // one-way delay, ns
	resetRate atomic.Uint64 // math.Float64bits of resets per connection per second

	mu      sync.Mutex
	gate    chan struct{} // closed while bytes flow; open during a black hole
	refuse  bool
	closed  bool
	links   map[*link]struct{}
	stop    chan struct{}
	wg      sync.WaitGroup
	conns   atomic.Int64
	resets  atomic.Int64
	bytesUp atomic.Int64
	bytesDn atomic.Int64
}

// New starts a proxy on 127.0.0.1 (a free port) that forwards every
// connection to target (host:port), faultless until told otherwise.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	gate := make(chan struct{})
	close(gate)
	p := &Proxy{ln: ln, target: target, gate: gate, links: map[*link]struct{}{}, stop: make(chan struct{})}
	p.wg.Add(2)
	go p.serve()
	go p.resetter()
	return p, nil
}

// Addr is the proxy's host:port: point clients here.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency holds every chunk of bytes for oneWay in each direction (a
// round trip of 2*oneWay), from when the proxy read it. Reading and
// writing run apart, so latency does not cap throughput. 0 removes it;
// chunks already held keep the delay they were read with.
func (p *Proxy) SetLatency(oneWay time.Duration) { p.latency.Store(int64(max(oneWay, 0))) }

// Blackhole(true) stops forwarding in both directions, on live and new
// connections alike: new connections are accepted (and the server dialled)
// but nothing flows, and nothing is closed. Bytes sent meanwhile are held,
// not dropped, and Blackhole(false) delivers them in order, as TCP does
// after a partition heals.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate: // flowing
		if on {
			p.gate = make(chan struct{})
		}
	default: // black hole
		if !on {
			close(p.gate)
		}
	}
}

// SetResetRate resets each live connection, once a second, with
// probability perSecond (clamped to [0, 1]); 0 turns it off.
func (p *Proxy) SetResetRate(perSecond float64) {
	p.resetRate.Store(math.Float64bits(min(max(perSecond, 0), 1)))
}

// ResetAll resets every live connection now: an RST to the client and to
// the server.
func (p *Proxy) ResetAll() {
	for _, l := range p.live() {
		l.reset()
	}
}

// Refuse(true) resets every live connection and every new one as soon as
// it is accepted, as a server that is down but whose port answers would;
// Refuse(false) lets new connections through again.
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
	if on {
		p.ResetAll()
	}
}

// Stats returns the counters so far.
func (p *Proxy) Stats() Stats {
	return Stats{Connections: p.conns.Load(), Resets: p.resets.Load(),
		BytesUp: p.bytesUp.Load(), BytesDown: p.bytesDn.Load()}
}

// Close stops the listener and closes every connection (a normal close,
// not a reset). It is idempotent.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.stop)
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, l := range p.live() {
		l.close(false)
	}
	p.wg.Wait()
}

func (p *Proxy) live() []*link {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls := make([]*link, 0, len(p.links))
	for l := range p.links {
		ls = append(ls, l)
	}
	return ls
}

// flowing returns a channel that is closed once bytes may flow.
func (p *Proxy) flowing() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gate
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return
		}
		p.conns.Add(1)
		p.mu.Lock()
		refuse, closed := p.refuse, p.closed
		if !closed && !refuse {
			p.wg.Add(1)
		}
		p.mu.Unlock()
		switch {
		case closed:
			_ = in.Close()
			return
		case refuse:
			p.resets.Add(1)
			rst(in)
			continue
		}
		go p.connect(in)
	}
}

// connect dials the target for a client connection and starts forwarding.
func (p *Proxy) connect(in net.Conn) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: 10 * time.Second}
	out, err := d.Dial("tcp", p.target)
	if err != nil {
		p.resets.Add(1)
		rst(in)
		return
	}
	l := &link{p: p, in: in, out: out, done: make(chan struct{})}
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		_ = in.Close()
		_ = out.Close()
		return
	case p.refuse:
		p.mu.Unlock()
		p.resets.Add(1)
		rst(in)
		rst(out)
		return
	}
	p.links[l] = struct{}{}
	p.wg.Add(2)
	p.mu.Unlock()
	go l.pipe(in, out, &p.bytesUp)
	go l.pipe(out, in, &p.bytesDn)
}

// resetter applies the reset rate once a second.
func (p *Proxy) resetter() {
	defer p.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		rate := math.Float64frombits(p.resetRate.Load())
		if rate <= 0 {
			continue
		}
		for _, l := range p.live() {
			if rand.Float64() < rate {
				l.reset()
			}
		}
	}
}

// link is one proxied connection: in from the client, out to the server.
type link struct {
	p       *Proxy
	in, out net.Conn
	once    sync.Once
	done    chan struct{}
	halves  atomic.Int32 // directions that ended cleanly (EOF passed on)
}

// close ends both sides, with an RST when hard, and forgets the link.
func (l *link) close(hard bool) bool {
	first := false
	l.once.Do(func() {
		first = true
		close(l.done)
		if hard {
			rst(l.in)
			rst(l.out)
		} else {
			_ = l.in.Close()
			_ = l.out.Close()
		}
		l.p.mu.Lock()
		delete(l.p.links, l)
		l.p.mu.Unlock()
	})
	return first
}

func (l *link) reset() {
	if l.close(true) {
		l.p.resets.Add(1)
	}
}

type chunk struct {
	due  time.Time
	data []byte
	err  error // set on the last one: why src ended
}

// pipe copies src to dst: a reader stamps each chunk with its due time
// (now + latency), and the writer delivers it no earlier, and only while
// the proxy is not a black hole. The two run apart, so the delay does not
// limit throughput, and bytes read during a black hole wait in order.
func (l *link) pipe(src, dst net.Conn, count *atomic.Int64) {
	defer l.p.wg.Done()
	q := make(chan chunk, 256)
	go func() {
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			c := chunk{due: time.Now().Add(time.Duration(l.p.latency.Load())), data: buf[:n], err: err}
			if n == 0 && err == nil {
				continue
			}
			select {
			case q <- c:
			case <-l.done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		var c chunk
		select {
		case c = <-q:
		case <-l.done:
			return
		}
		if d := time.Until(c.due); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-l.done:
				return
			}
		}
		select {
		case <-l.p.flowing():
		case <-l.done:
			return
		}
		if len(c.data) > 0 {
			n, err := dst.Write(c.data)
			count.Add(int64(n))
			if err != nil {
				l.close(true)
				return
			}
		}
		switch {
		case c.err == nil:
		case errors.Is(c.err, io.EOF):
			// A clean end of one direction: pass the FIN on, and end the
			// link once both directions have.
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
			if l.halves.Add(1) == 2 {
				l.close(false)
			}
			return
		default:
			// src was reset or closed under us: the other side learns by
			// a reset too.
			l.close(true)
			return
		}
	}
}

// rst closes c so that the peer gets an RST (ECONNRESET), not a FIN.
func rst(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
