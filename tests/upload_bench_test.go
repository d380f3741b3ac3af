package tests

import (
	"crypto/sha256"
	"encoding/base64"
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
//   - again: the same bytes uploaded again to the host running them;
//   - again-digest: the same, as `berth modules push` sends them: their
//     SHA-256 (taken in the time measured) in Content-Digest, and the body
//     only on the host's 100 Continue, which it does not send for bytes it
//     runs already.
//
// put-ms is the PUT alone (again-digest: with the sender's hash);
// again-digest's request-ms is its request without that hash, the host's
// part of a re-upload. Host starts and stops are not timed. The
// wazero-* and hash-and-audit cases are plain wazero and the store doing
// the same work in the same run (uploadBaselines), the denominators of the
// issue's ratios.
//
//	go test ./tests -run '^$' -bench BenchmarkUploadToFirstEvent -benchtime 7x
func BenchmarkUploadToFirstEvent(b *testing.B) {
	svc := newNotifier(b)
	cfg := hostConfig{NotifyURL: svc.URL()}
	var order int
	var deployWith func(b *testing.B, h *hostProc, upload func()) time.Duration
	// deploy uploads the notifier to h and ships an order at once; it
	// returns when the service has been notified, with the PUT's time.
	deploy := func(b *testing.B, h *hostProc, want int) time.Duration {
		return deployWith(b, h, func() { h.uploadNotifier(b, want) })
	}
	deployWith = func(b *testing.B, h *hostProc, upload func()) time.Duration {
		start := time.Now()
		upload()
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
	// onTheSameHost times upload again and again on a host running the
	// notifier's bytes already.
	onTheSameHost := func(b *testing.B, h *hostProc, upload func()) {
		deploy(b, h, 201)
		waitCompiled(b, h)
		putTotal = 0
		for b.Loop() {
			putTotal += deployWith(b, h, upload)
		}
		report(b)
	}
	b.Run("again", func(b *testing.B) {
		h := newHost(b, cfg)
		onTheSameHost(b, h, func() { h.uploadNotifier(b, 200) })
	})
	b.Run("again-digest", func(b *testing.B) {
		h := newHost(b, cfg)
		var hashing time.Duration
		onTheSameHost(b, h, func() {
			start := time.Now()
			sum := sha256.Sum256(notifierWasm)
			hashing += time.Since(start)
			h.must(200, "PUT", "/v1/modules/"+moduleName, notifierWasm, "Content-Type", "application/wasm",
				"Content-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(sum[:])+":", "Expect", "100-continue")
		})
		b.ReportMetric(float64((putTotal-hashing).Microseconds())/1000/float64(b.N), "request-ms")
	})
	uploadBaselines(b)
}
