package faultnet

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echo serves lines back on a free port until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// throughProxy returns a proxy to an echo server, a connection through it
// and a reader of that connection, all closed when the test ends.
func throughProxy(t *testing.T) (*Proxy, net.Conn, *bufio.Reader) {
	t.Helper()
	p, err := Listen(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return p, c, bufio.NewReader(c)
}

// TestCutHoldsAndHealPasses: through a cut proxy nothing comes back (a read
// times out, as on a link dropping packets); after Heal what was sent
// during the cut arrives, and new connections work again.
func TestCutHoldsAndHealPasses(t *testing.T) {
	p, c, r := throughProxy(t)
	roundTrip := func(msg string, within time.Duration) (string, error) {
		c.SetDeadline(time.Now().Add(within))
		if _, err := c.Write([]byte(msg + "\n")); err != nil {
			return "", err
		}
		return r.ReadString('\n')
	}
	if got, err := roundTrip("one", 5*time.Second); err != nil || got != "one\n" {
		t.Fatalf("before the cut: %q, %v", got, err)
	}
	p.Cut()
	if got, err := roundTrip("two", 200*time.Millisecond); err == nil {
		t.Fatalf("through a cut proxy: %q", got)
	}
	p.Heal()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "two\n" {
		t.Fatalf("after the heal: %q, %v", got, err)
	}
	d, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.SetDeadline(time.Now().Add(5 * time.Second))
	d.Write([]byte("three\n"))
	if got, err := bufio.NewReader(d).ReadString('\n'); err != nil || got != "three\n" {
		t.Fatalf("a new connection after the heal: %q, %v", got, err)
	}
}
