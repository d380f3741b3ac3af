package registry

import (
	"bytes"
	"context"
	"os"
)

// stager is a ModuleStore that writes a module's bytes durably before
// their version is numbered (fileStore): an upload starts that write
// beside the sandbox's Load, which it used to follow, and stores the
// version through the file written. The upload still answers only once
// the version is on disk.
type stager interface {
	// stage writes wasm for module name to a new file, fsynced, and
	// returns its path; the caller removes it if no version takes it.
	stage(name string, wasm []byte) (string, error)
	// storeStaged is Store with the bytes in the file stage wrote.
	storeStaged(ctx context.Context, s StoredModule, staged string, wasm []byte, keep int) error
}

// staging is one upload's write of its bytes, started before its Load.
type staging struct {
	st   stager
	done chan struct{}
	path string // the staged file, "" once a version took it
	err  error
}

// wasmMagic opens every WebAssembly module: bytes without it are not
// written before the Load refuses them.
var wasmMagic = []byte("\x00asm")

// startStaging starts writing wasm for name in the background, if the
// store can (nil otherwise: store writes the bytes then).
func (r *Registry) startStaging(name string, wasm []byte) *staging {
	st, ok := r.store.(stager)
	if !ok || !bytes.HasPrefix(wasm, wasmMagic) || validName(name) != nil {
		return nil
	}
	g := &staging{st: st, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		g.path, g.err = st.stage(name, wasm)
	}()
	return g
}

// store stores m as the store's Store does, through the staged file if
// there is one (once it is written).
func (g *staging) store(ctx context.Context, store ModuleStore, m StoredModule, wasm []byte, keep int) error {
	if g == nil {
		return store.Store(ctx, m, wasm, keep)
	}
	<-g.done
	if g.err != nil {
		return g.err
	}
	if g.path == "" { // a version took the file: another try writes the bytes again
		return store.Store(ctx, m, wasm, keep)
	}
	err := g.st.storeStaged(ctx, m, g.path, wasm, keep)
	if err == nil {
		g.path = ""
	}
	return err
}

// discard removes the staged file if no version took it (the Load failed,
// the processor is another module's, the store refused): in the
// background, that an upload refused does not wait for the write.
func (g *staging) discard() {
	if g == nil {
		return
	}
	go func() {
		<-g.done
		if g.path != "" {
			os.Remove(g.path)
		}
	}()
}
