// Package loopguard rewrites a WebAssembly module so that it calls into the
// host at bounded intervals, letting the host stop a spinning guest at its
// deadline cheaply.
//
// wazero can interrupt a guest itself (WithCloseOnContextDone), but it does so
// by checking at every loop header, and the Go compiler wraps most function
// bodies in a loop, which makes each call about 4x slower. Instead, Rewrite
// makes every loop header decrement a counter global; when the counter reaches
// zero the guest resets it and calls the module's own
// wasi_snapshot_preview1.sched_yield import. The host's sched_yield checks the
// call's deadline and panics when it has passed, which ends the call.
//
// Calling the host, rather than merely reading a flag, matters: because the
// guest reaches Go at bounded intervals, a Go garbage collection never waits
// forever for a guest that spins.
//
// The rewriter parses the binary format itself (core spec 1.0/2.0) and decodes
// every immediate of every instruction, so a loop opcode byte inside an
// immediate is never mistaken for an instruction. Instructions it cannot
// decode (SIMD, threads, exceptions, GC) are refused with an error rather
// than rewritten wrongly.
package loopguard
