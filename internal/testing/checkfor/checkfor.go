// Package checkfor is the tests' one way to wait for a condition that another
// goroutine or process makes true: poll it at a short interval until it holds
// or a deadline passes, the way nats-server's tests use checkFor. A wait that
// times out says what it last saw, so that a failure in CI can be read
// without running the test again. It waits for something to happen; it never
// proves that something did not (for that, tests drive the fake clock or wait
// for an explicit signal).
package checkfor

import (
	"testing"
	"time"
)

// Nil polls check every interval until it returns nil, and fails t with the
// last error check returned once within has passed without that. check says
// what it saw in its error ("2 of 3 hosts", not "not yet"): that error is
// the whole failure message.
func Nil(t testing.TB, within, interval time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %v", within, err)
		}
		time.Sleep(interval)
	}
}
