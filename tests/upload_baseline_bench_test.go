package tests

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/wasmbench"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/wasm/abi"
	"github.com/tetratelabs/wazero"
)

// uploadBaselines are plain wazero (and the store) doing what each case of
// BenchmarkUploadToFirstEvent asks of the host, timed in the same run, so
// that the host's figures are stated as ratios to them (issue 32):
//
//   - wazero-fresh: a new runtime on the interpreter, the notifier's
//     compile, an instance (its _initialize) and its first call;
//   - wazero-cache: a new compiler runtime over a filled compilation
//     cache: CompileModule (a cache hit), an instance and its first call;
//   - hash-and-audit: the bytes' SHA-256 and one fsynced audit write to a
//     Badger ledger, the least a re-upload of known bytes must do.
//
// The first call is the notifier's onOrderShipped for an order with an
// owner; plain wazero's host functions answer nothing, so the handler ends
// with its error, which is not the point: the call ran.
func uploadBaselines(b *testing.B) {
	ev := &abi.Event{Handler: "onOrderShipped", Type: "OrderShipped", AggregateType: "Order", AggregateID: "o-1",
		Version: 1, OwnerID: "alice", Position: 1, Payload: []byte(`{"carrier":"DHL"}`),
		DeadlineUnixNano: time.Now().Add(time.Hour).UnixNano()}
	firstCall := func(b *testing.B, rc wazero.RuntimeConfig, cacheDir string) {
		g := wasmbench.NewPlainGuestOn(b, notifierWasm, rc, cacheDir)
		_ = g.Instance(b).Call(context.Background(), ev) // see above: ran is enough
	}
	b.Run("wazero-fresh", func(b *testing.B) {
		for b.Loop() {
			firstCall(b, wazero.NewRuntimeConfigInterpreter(), "")
		}
	})
	b.Run("wazero-cache", func(b *testing.B) {
		dir := b.TempDir()
		firstCall(b, wazero.NewRuntimeConfigCompiler(), dir) // fills the cache
		for b.Loop() {
			firstCall(b, wazero.NewRuntimeConfigCompiler(), dir)
		}
	})
	b.Run("hash-and-audit", func(b *testing.B) {
		l, err := ledger.Open(b.TempDir(), ledger.Options{SyncWrites: true})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close(context.Background())
		for b.Loop() {
			sum := sha256.Sum256(notifierWasm)
			e := ledger.AuditEntry{Time: time.Now().UTC(), Actor: "anonymous", Action: "PUT /v1/modules/shipment-notifier",
				Status: 200, Target: "shipment-notifier", Detail: "unchanged, sha256 " + string(sum[:4])}
			if err := l.Update(context.Background(), func(tx ledger.Tx) error { return tx.Audit(e) }); err != nil {
				b.Fatal(err)
			}
		}
	})
}
