package testbuild_test

import (
	"sync"
	"testing"

	"github.com/berthhq/berth/guest-sdk/berthtest"
	"github.com/berthhq/berth/hostspec"
	"github.com/berthhq/berth/internal/testing/testbuild"
)

// rustBuilds holds, by crate, a function that builds the crate's module
// once per test binary.
var rustBuilds sync.Map

// rustSpec loads the compiled module of the Rust crate in the host's sandbox
// (the host refuses a module that does not match ABI.md).
func rustSpec(t *testing.T, crate string, opts ...hostspec.Option) *berthtest.Spec {
	t.Helper()
	build, _ := rustBuilds.LoadOrStore(crate, sync.OnceValues(func() ([]byte, error) { return testbuild.RustBytes(crate) }))
	wasm, err := build.(func() ([]byte, error))()
	if err != nil {
		t.Fatal(err)
	}
	return hostspec.New(t, wasm, opts...)
}
