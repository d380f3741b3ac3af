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

// Eventually is Nil for a cheap check (memory, a local store): every 2 ms,
// for up to 20 s, generous for a loaded machine.
func Eventually(t testing.TB, check func() error) {
	t.Helper()
	Nil(t, 20*time.Second, 2*time.Millisecond, check)
}

// Within is Nil for a check that costs a round trip (an HTTP call to a
// built host): every 25 ms, for up to within.
func Within(t testing.TB, within time.Duration, check func() error) {
	t.Helper()
	Nil(t, within, 25*time.Millisecond, check)
}
