// Package rawguest is a guest that speaks the Berth ABI without the guest
// SDK, as a module written in another language would, so that it can
// describe what the SDK never would: an error class tree with an unknown
// parent or a cycle, which the host must refuse at upload. Its one handler
// succeeds.
package rawguest

//lint:file-ignore U1000 the functions are exported to the host by go:wasmexport.

import (
	"unsafe"

	"github.com/berthhq/berth/wasm/abi"
)

// Classes is the error class tree the module describes; main sets it from
// an init function.
var Classes []abi.ErrorClass

// Buffers the host reads from or writes into, kept alive between calls.
var inBuf, outBuf []byte

//go:wasmexport berth_abi_version
func abiVersion() uint32 { return abi.Version }

//go:wasmexport berth_alloc
func alloc(n uint32) unsafe.Pointer {
	inBuf = make([]byte, n+1)
	return unsafe.Pointer(&inBuf[0])
}

//go:wasmexport berth_describe
func describe() uint64 {
	d := abi.Description{
		ABIVersion: abi.Version, Processor: "BadClassTree", Kind: abi.KindReactor,
		Handlers: []abi.HandlerDesc{{Name: "onAnything", EventTypes: []string{"Anything"}}},
		Classes:  Classes,
	}
	return pack(abi.AppendDescription(nil, &d))
}

//go:wasmexport berth_handle
func handle(ptr unsafe.Pointer, n uint32) uint64 {
	return pack(abi.AppendResult(nil, &abi.Result{Status: abi.StatusOK}))
}

func pack(b []byte) uint64 {
	outBuf = b
	return abi.Pack(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(outBuf)))), uint32(len(outBuf)))
}
