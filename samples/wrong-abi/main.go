// Command wrong-abi exports the Berth ABI's functions but reports ABI
// version 2, which this host does not speak: the host must refuse it.
package main

//lint:file-ignore U1000 the functions are exported to the host by go:wasmexport.

import "unsafe"

var buf []byte

//go:wasmexport berth_abi_version
func abiVersion() uint32 { return 2 }

//go:wasmexport berth_alloc
func alloc(n uint32) unsafe.Pointer {
	buf = make([]byte, n+1)
	return unsafe.Pointer(&buf[0])
}

//go:wasmexport berth_describe
func describe() uint64 { return 0 }

//go:wasmexport berth_handle
func handle(ptr unsafe.Pointer, n uint32) uint64 { return 0 }

func main() {}
