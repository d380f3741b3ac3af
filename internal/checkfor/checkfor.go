// Package checkfor is the tests' one way to wait for a condition that another
// goroutine or process makes true: poll it at a short interval until it holds
// or a deadline passes, the way nats-server's tests use checkFor. It waits for
// something to happen; it never proves that something did not (for that,
// tests drive the fake clock or wait for an explicit signal).
package checkfor

import (
	"testing"
	"time"
)

// Cond polls cond every interval until it holds, and fails t naming what it
// waited for once within has passed without it.
func Cond(t testing.TB, within, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(interval)
	}
}
