// Package faultnet puts a TCP proxy between a process and a server that a
// test can cut and heal, to make the network faults of issue 31 without
// network namespaces: while cut, nothing passes either way on any
// connection through it, and new connections are taken but stall, as with
// packets dropped silently (iptables DROP) — neither side is told, and each
// learns of it only from its own timeouts. Heal lets everything held pass
// again, as TCP's retransmissions would once the link is back.
//
// The faults are at the TCP level of one path, in-process: the cluster
// package's tests cut an in-process NATS node's routes with it
// (natstest.RunClusterRouted). The end-to-end fault tests, on processes,
// cut and slow real links in network namespaces (internal/testing/netns).
// Only tests import it.
package faultnet

import (
	"net"
	"sync"
	"sync/atomic"
)

// Proxy forwards the connections made to Addr to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cut    bool
	healed chan struct{} // closed by Heal; nil while not cut
	closed bool
	done   chan struct{} // closed by Close
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup

	sent atomic.Int64 // bytes passed from clients to the target
}

// Listen starts a proxy to target on a free port of 127.0.0.1.
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Sent is the number of bytes the proxy's clients have sent through it to
// the target, counted as they pass.
func (p *Proxy) Sent() int64 { return p.sent.Load() }

// Cut stops everything from passing, both ways, on every connection, and
// stalls new ones, until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut {
		p.cut, p.healed = true, make(chan struct{})
	}
}

// Heal lets everything pass again, what was held first.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		p.cut = false
		close(p.healed)
		p.healed = nil
	}
}

// Close stops the proxy and closes every connection through it.
func (p *Proxy) Close() {
	p.mu.Lock()
	if !p.closed {
		close(p.done)
	}
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	if p.cut {
		p.cut = false
		close(p.healed)
		p.healed = nil
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// pass waits while the proxy is cut; false once it is closed.
func (p *Proxy) pass() bool {
	for {
		p.mu.Lock()
		closed, ch := p.closed, p.healed
		p.mu.Unlock()
		if closed {
			return false
		}
		if ch == nil {
			return true
		}
		<-ch
	}
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve connects c to the target once the proxy lets it pass, and pumps
// both ways.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.untrack(c)
	if !p.pass() {
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(s) {
		return
	}
	defer p.untrack(s)
	done := make(chan struct{}, 2)
	go func() { p.pump(s, c, &p.sent); done <- struct{}{} }()
	go func() { p.pump(c, s, nil); done <- struct{}{} }()
	<-done
	// One side ended: end the other as well (the deferred untracks close
	// both, which ends the second pump).
}

// pump copies from src to dst, holding what it read while the proxy is
// cut; the end of src passes (closing both) only once it is healed too, as
// a FIN would. It adds what it wrote to count, if given.
func (p *Proxy) pump(dst, src net.Conn, count *atomic.Int64) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if !p.pass() {
			return
		}
		if n > 0 {
			w, werr := dst.Write(buf[:n])
			if count != nil {
				count.Add(int64(w))
			}
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
