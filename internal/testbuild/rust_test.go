package testbuild_test

import (
	"testing"

	"github.com/berthhq/berth/internal/testbuild"
)

// rustCrates are the Rust crates of the repository whose own tests
// (`cargo test`) the Go test command runs: the SDK and its samples.
var rustCrates = []string{
	"guest-sdk/rust",
	"samples/shipment-notifier-rs",
	"samples/order-summary-rs",
	"samples/order-saga-rs",
	"samples/misbehaving-rs",
}

// TestRustCrates runs each crate's native tests with cargo, so that the one
// test command (go test ./... ./guest-sdk/... ./wasm/abi/...) covers the
// Rust SDK too: its codec against the Go codec's golden vectors, its test
// kit, and the samples' scenarios.
func TestRustCrates(t *testing.T) {
	for _, c := range rustCrates {
		t.Run(c, func(t *testing.T) {
			out, err := testbuild.Cargo(c, "test")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s", out)
		})
	}
}
