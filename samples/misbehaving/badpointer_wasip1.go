//go:build wasip1

package main

import "unsafe"

//go:wasmimport berth log
func hostLog(level uint32, ptr unsafe.Pointer, n uint32)

// badPointer hands the host a range far outside the guest's memory.
func badPointer() { hostLog(1, unsafe.Pointer(uintptr(0xfffff000)), 0x10000) }
