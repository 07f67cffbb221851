package benchutil

import (
	"net"
	"sync"
	"time"
)

// DelayProxy forwards TCP connections from a loopback listener to target,
// holding every chunk of bytes for oneWay in each direction: a network
// round trip of 2*oneWay, as between a service and a managed database in
// its region, without limiting bandwidth. Close stops it and every
// connection through it.
type DelayProxy struct {
	ln      net.Listener
	target  string
	oneWay  time.Duration
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
	stopped bool
}

// NewDelayProxy starts a proxy to target (host:port).
func NewDelayProxy(target string, oneWay time.Duration) (*DelayProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &DelayProxy{ln: ln, target: target, oneWay: oneWay, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *DelayProxy) Addr() string { return p.ln.Addr().String() }

// Close stops the listener and closes every proxied connection.
func (p *DelayProxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.stopped = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *DelayProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *DelayProxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		if !p.track(in, out) {
			return
		}
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe copies src to dst, each chunk written oneWay after it was read.
// Reading and writing run apart so that delay does not cap throughput.
func (p *DelayProxy) pipe(src, dst net.Conn) {
	defer p.wg.Done()
	type chunk struct {
		at   time.Time
		data []byte
	}
	q := make(chan chunk, 1024)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				q <- chunk{time.Now().Add(p.oneWay), buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.data); err != nil {
			break
		}
	}
	// Either side done: close both so the peer pipe ends too.
	_ = src.Close()
	_ = dst.Close()
	// Drain, so the reader is never stuck sending and exits on the close.
	for range q {
		continue
	}
}
