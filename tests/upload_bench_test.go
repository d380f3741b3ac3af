package tests

import (
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"testing"
	"time"
)

// BenchmarkUploadToFirstEvent is a deployer's wait, through the built
// binary: from `PUT /v1/modules/shipment-notifier` to the first event the
// module handles (the notification a fake service receives for an order
// shipped right after the PUT answered), on the host's default
// configuration (tier-up, store.sync "always"):
//
//   - fresh: a new host, no compilation cache;
//   - cache: a new host whose data directory holds only the compilation
//     cache a first host left (<data>/wasm-cache);
//   - again: the same bytes uploaded again to the host running them.
//
// put-ms is the PUT alone. Host starts and stops are not timed. The
// wazero-* and hash-and-audit cases are plain wazero and the store doing
// the same work in the same run (uploadBaselines), the denominators of the
// issue's ratios.
//
//	go test ./tests -run '^$' -bench BenchmarkUploadToFirstEvent -benchtime 7x
func BenchmarkUploadToFirstEvent(b *testing.B) {
	svc := newNotifier(b)
	cfg := hostConfig{NotifyURL: svc.URL()}
	var order int
	// deploy uploads the notifier to h and ships an order at once; it
	// returns when the service has been notified, with the PUT's time.
	deploy := func(b *testing.B, h *hostProc, want int) time.Duration {
		start := time.Now()
		h.uploadNotifier(b, want)
		put := time.Since(start)
		order++
		id := fmt.Sprintf("o-bench-%d", order) // a key of its own: the service counts each key's notifications
		h.appendShipped(b, id, "alice")
		checkfor.Nil(b, time.Minute, 200*time.Microsecond, func() error {
			if svc.notified(key(id, 1)) == 0 {
				return fmt.Errorf("%s not notified yet", id)
			}
			return nil
		})
		return put
	}
	var putTotal time.Duration
	report := func(b *testing.B) { b.ReportMetric(float64(putTotal.Milliseconds())/float64(b.N), "put-ms") }

	// onNewHosts times deploy on a new host each iteration, which start
	// makes (not timed, nor is its stop).
	onNewHosts := func(b *testing.B, start func() *hostProc) {
		putTotal = 0
		for b.Loop() {
			b.StopTimer()
			h := start()
			b.StartTimer()
			putTotal += deploy(b, h, 201)
			b.StopTimer()
			h.Stop()
			b.StartTimer()
		}
		report(b)
	}
	b.Run("fresh", func(b *testing.B) {
		onNewHosts(b, func() *hostProc { return newHost(b, cfg) })
	})
	b.Run("cache", func(b *testing.B) {
		first := newHost(b, cfg)
		deploy(b, first, 201)
		// Its compile in the background (tier-up) fills the cache, and would
		// share the CPU with what is timed.
		waitCompiled(b, first)
		first.Stop()
		onNewHosts(b, func() *hostProc { return hostOverCache(b, first, cfg) })
	})
	b.Run("again", func(b *testing.B) {
		h := newHost(b, cfg)
		deploy(b, h, 201)
		waitCompiled(b, h)
		putTotal = 0
		for b.Loop() {
			putTotal += deploy(b, h, 200)
		}
		report(b)
	})
	uploadBaselines(b)
}
