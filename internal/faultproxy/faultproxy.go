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
//	held := p.HoldUp(func(data []byte) bool { … }) // freeze the connection whose next
//	<-held                                        // HTTP/2 DATA frame matches
package faultproxy

import (
	"bytes"
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

	hold atomic.Pointer[holdUp] // armed by HoldUp, taken by the first match

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

// holdUp is an armed HoldUp.
type holdUp struct {
	match func(data []byte) bool
	held  chan struct{}
}

// HoldUp arms a one-shot hold on client-to-server HTTP/2 traffic (gRPC):
// the first DATA frame on any connection whose payload match accepts is
// never delivered, nor is anything that client sends on that connection
// after it, while everything before it is, whole frames at a time; the
// server's side of the connection keeps flowing. The returned channel is
// closed when that happens. It is how a test stops one request (say, the
// commit of a transaction whose reads already reached the server) and
// nothing else: a client killed then leaves that transaction open on the
// server. Connections that do not start with the HTTP/2 preface pass
// through untouched. A later HoldUp replaces one not yet taken.
func (p *Proxy) HoldUp(match func(data []byte) bool) <-chan struct{} {
	h := &holdUp{match: match, held: make(chan struct{})}
	p.hold.Store(h)
	return h.held
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
	var scan *frameScanner
	if src == l.in {
		scan = &frameScanner{}
	}
	go func() {
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			c := chunk{due: time.Now().Add(time.Duration(l.p.latency.Load())), data: buf[:n], err: err}
			if scan != nil {
				c.data = scan.feed(c.data, l.p.hold.Load, func(h *holdUp) bool { return l.p.hold.CompareAndSwap(h, nil) })
			}
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

// http2Preface opens every HTTP/2 connection from a client.
var http2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// frameScanner cuts a client's HTTP/2 byte stream into frames, for
// HoldUp: it passes on whole frames only, so that a matching DATA frame
// can be withheld, and once one has been, nothing more.
type frameScanner struct {
	pending []byte
	started bool // the preface was seen
	plain   bool // not HTTP/2: pass everything through
	held    bool // a frame was withheld: pass nothing on
}

// feed takes the bytes just read and returns those to deliver now. armed
// returns the armed hold, if any; take claims it (false if another
// connection took it first).
func (f *frameScanner) feed(data []byte, armed func() *holdUp, take func(*holdUp) bool) []byte {
	switch {
	case f.held:
		return nil
	case f.plain:
		return data
	}
	f.pending = append(f.pending, data...)
	var out []byte
	if !f.started {
		n := min(len(f.pending), len(http2Preface))
		if !bytes.Equal(f.pending[:n], http2Preface[:n]) {
			f.plain = true
			out, f.pending = f.pending, nil
			return out
		}
		if n < len(http2Preface) {
			return nil
		}
		f.started = true
		out = append(out, f.pending[:n]...)
		f.pending = f.pending[n:]
	}
	for len(f.pending) >= 9 {
		size := 9 + (int(f.pending[0])<<16 | int(f.pending[1])<<8 | int(f.pending[2]))
		if len(f.pending) < size {
			break
		}
		frame := f.pending[:size]
		const dataFrame = 0
		if h := armed(); h != nil && frame[3] == dataFrame && h.match(frame[9:]) && take(h) {
			f.held, f.pending = true, nil
			close(h.held)
			return out
		}
		out = append(out, frame...)
		f.pending = f.pending[size:]
	}
	if len(f.pending) == 0 {
		f.pending = nil // let the buffer go
	}
	return out
}
