// Command spin is a test guest for package loopguard. It is built with
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared and exports three
// functions whose loop behaviour the tests exercise.
package main

import "time"

// main is required by -buildmode=c-shared but never runs: the host calls
// _initialize and then the exports.
func main() {}

// spin never returns: it is the guest a deadline has to stop.
//
//go:wasmexport spin
func spin() {
	for {
	}
}

// sum fills a slice of n elements and returns the sum, so the tests can
// compare results before and after the rewrite. It allocates on purpose, so
// that the runtime (allocator, GC) runs under the rewrite too.
//
//go:wasmexport sum
func sum(n int32) int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = int64(i)*3 + 1
	}
	var t int64
	for _, v := range s {
		t += v
	}
	return t
}

// nap sleeps ms milliseconds and returns ms: a call that blocks in the
// scheduler rather than spinning.
//
//go:wasmexport nap
func nap(ms int32) int32 {
	time.Sleep(time.Duration(ms) * time.Millisecond)
	return ms
}
