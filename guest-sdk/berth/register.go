package berth

// registered is the module's processor. A WebAssembly module exports plain
// functions (berth_describe, berth_handle), so the processor they serve must
// be reachable from package scope; it is set once, from the module's init.
var registered *Processor

// Register makes p the module's processor. Call it once, from an init
// function of the module's main package (a module built with
// -buildmode=c-shared runs its init functions, not main). A second call
// panics: a module serves one processor.
func Register(p *Processor) {
	if registered != nil {
		panic("berth: Register called twice; a module serves one processor")
	}
	registered = p
}

// Registered returns the processor passed to Register, or nil.
func Registered() *Processor { return registered }
