package faultnet

import (
	"bufio"
	"fmt"
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

// TestLossyDelaysAndKeepsOrder: through a lossy proxy every line comes
// back, in order, some of them late; Lossy(0, 0) ends the delays.
func TestLossyDelaysAndKeepsOrder(t *testing.T) {
	p, c, r := throughProxy(t)
	roundTrip := func(line string) time.Duration {
		t.Helper()
		start := time.Now()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadString('\n')
		if err != nil || got != line+"\n" {
			t.Fatalf("sent %q, read %q (%v)", line, got, err)
		}
		return time.Since(start)
	}
	// A delay of a whole rto is loss, not load: 200 ms on the loopback.
	const rto = 200 * time.Millisecond
	p.Lossy(0.3, rto)
	late := 0
	for i := range 12 {
		if roundTrip(fmt.Sprint("line ", i)) >= rto {
			late++
		}
	}
	// Each round trip passes the proxy twice, late with probability
	// 0.51: none of 12 late (p = 0.49^12, 2e-4) is a proxy that loses
	// nothing. A pass lost 7 times in a row (p = 0.3^7 each) waits 25 s,
	// within the 30 s deadline; at 50 % loss 6 in a row (12.6 s) came too
	// often for a test.
	if late == 0 {
		t.Errorf("none of 12 round trips late at 30%% loss")
	}
	p.Lossy(0, 0)
	for i := range 6 {
		if d := roundTrip(fmt.Sprint("after ", i)); d >= rto {
			t.Errorf("a round trip took %v after the loss ended", d)
		}
	}
}
