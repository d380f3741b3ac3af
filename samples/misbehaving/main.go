// Command misbehaving is a module whose handlers misbehave on purpose, one
// way each, for the sandbox's tests: each handler is named after what it does.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
)

// sink keeps allocations reachable so the memory hog really holds memory.
var sink [][]byte

// grown holds the memory grower's allocations until it returns.
var grown [][]byte

func init() {
	p := &berth.Processor{Name: "Misbehaving", Kind: berth.Reactor}
	p.On("spinner", "Spin", func(*berth.Context) error {
		for i := 0; ; i++ {
			if i < 0 {
				return nil
			}
		}
	})
	p.On("sleeper", "Sleep", func(*berth.Context) error {
		time.Sleep(time.Hour)
		return nil
	})
	// impatientSleeper sleeps like sleeper, under its own retry settings: a
	// short timeout, and a timeout is unrecoverable (parks at once).
	p.On("impatientSleeper", "SleepImpatiently", func(*berth.Context) error {
		time.Sleep(time.Hour)
		return nil
	}, berth.Retry{MaxAttempts: 5, Timeout: 300 * time.Millisecond, Unrecoverable: []*berth.ErrorClass{berth.ClassTimeout}})
	p.On("channelWaiter", "Wait", func(*berth.Context) error {
		ch := make(chan int)
		go func() { time.Sleep(time.Hour); ch <- 1 }()
		<-ch
		return nil
	})
	p.On("hostCallBlocker", "Block", func(c *berth.Context) error {
		url, _ := c.Config.Get("blackhole-url")
		_, err := c.HTTP.Do(&berth.Request{Method: "GET", URL: url})
		return err
	})
	p.On("memoryHog", "Hog", func(*berth.Context) error {
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	})
	// bigAlloc allocates one 64 MiB block: past a smaller limit the host
	// refuses the memory.grow, and the Go runtime dies of it.
	p.On("bigAlloc", "BigAlloc", func(*berth.Context) error {
		b := make([]byte, 64<<20)
		b[len(b)-1] = 1
		sink = append(sink, b)
		return nil
	})
	// memoryGrower grows the heap by the payload's {"mib": n} and succeeds:
	// the instance keeps that memory (WebAssembly memory never shrinks).
	p.On("memoryGrower", "Grow", func(c *berth.Context) error {
		var in struct{ MiB int }
		if err := c.Event.Decode(&in); err != nil {
			return err
		}
		for range in.MiB {
			b := make([]byte, 1<<20)
			b[len(b)-1] = 1
			grown = append(grown, b)
		}
		grown = nil
		return nil
	})
	// cruncher does the payload's {"n": n} rounds of arithmetic and succeeds:
	// CPU work whose time depends on the tier it runs on (the interpreter's
	// is many times the compiled code's), for tier-up's tests.
	p.On("cruncher", "Crunch", func(c *berth.Context) error {
		var in struct{ N int }
		if err := c.Event.Decode(&in); err != nil {
			return err
		}
		x := uint64(88172645463325252)
		for range in.N {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		c.Log.Info("crunched", "attempt", c.Attempt, "result", x)
		return nil
	})
	p.On("panicker", "Panic", func(*berth.Context) error {
		panic("the handler panicked on purpose")
	})
	p.On("crasher", "Crash", func(*berth.Context) error {
		done := make(chan struct{})
		go func() { panic("a goroutine crashed the guest on purpose") }()
		<-done
		return nil
	})
	p.On("echo", "Echo", func(c *berth.Context) error {
		c.Log.Info("echo", "key", c.InvocationKey)
		fmt.Println("stdout line from", c.InvocationKey)
		return nil
	})
	p.On("badPointer", "BadPointer", func(*berth.Context) error {
		badPointer()
		return nil
	})
	// clockRandom reads the clocks and 16 random bytes and fails with them
	// in its message: a replay that gives it the recorded readings and
	// bytes fails with the same message (attempt capsules' tests).
	p.On("clockRandom", "ClockRandom", func(*berth.Context) error {
		start := time.Now()
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		return fmt.Errorf("clock %d, %d ns on, random %s", start.UnixNano(), time.Since(start).Nanoseconds(), hex.EncodeToString(b[:]))
	})
	// authorizedCall GETs its service-url with credentials in its headers
	// and fails unless the answer is 2xx, with the body in its message.
	p.On("authorizedCall", "AuthorizedCall", func(c *berth.Context) error {
		url, _ := c.Config.Get("service-url")
		return authorizedGet(c, url+authorizedPath)
	})
	berth.Register(p)
}

// authorizedGet GETs url with an Authorization and a Cookie header and
// fails unless the answer is 2xx.
func authorizedGet(c *berth.Context, url string) error {
	resp, err := c.HTTP.Do(&berth.Request{Method: "GET", URL: url,
		Header: map[string]string{"Authorization": "Bearer secret-token", "Cookie": "session=secret-cookie", "Accept": "text/plain"}})
	if err != nil {
		return err
	}
	if resp.Status >= 300 {
		return fmt.Errorf("the service answered %d: %.40s", resp.Status, resp.Body)
	}
	return nil
}

func main() {}
