package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/tetratelabs/wazero"
	"golang.org/x/sync/singleflight"
)

// compiled is one compiled module in one runtime, reference counted: the LRU
// holds one reference and every live instance another, so evicting a module
// in use closes it only once its last instance is gone.
type compiled struct {
	cm      wazero.CompiledModule
	onClose func() // after cm.Close: what it held is garbage now (nil: nothing)
	// codeBytes is the machine code its compile mapped (codeMeter); -1:
	// not known, 0: none (the interpreter's form is on the Go heap).
	codeBytes int64

	mu   sync.Mutex
	refs int
}

// acquire takes a reference; false if the module was already closed.
func (c *compiled) acquire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refs == 0 {
		return false
	}
	c.refs++
	return true
}

// release drops a reference and closes the module after the last one.
func (c *compiled) release() {
	c.mu.Lock()
	c.refs--
	last := c.refs == 0
	c.mu.Unlock()
	if last {
		c.cm.Close(context.Background())
		if c.onClose != nil {
			c.onClose()
		}
	}
}

// compiler compiles each (bytes, runtime) once, however many callers ask at
// the same time, and keeps the most recently used results.
type compiler struct {
	flight singleflight.Group
	cache  *lru.Cache[string, *compiled]
	freed  func() // after each compile, and after closing a compiled module: memory to give back
}

// newCompiler returns a compiler that keeps size compiled modules and calls
// freed after each compile and after closing a compiled module.
func newCompiler(size int, freed func()) (*compiler, error) {
	cache, err := lru.NewWithEvict(size, func(_ string, c *compiled) { c.release() })
	if err != nil {
		return nil, fmt.Errorf("sandbox: compiled module cache: %w", err)
	}
	return &compiler{cache: cache, freed: freed}, nil
}

// get returns a referenced compiled module; the caller must release it.
func (c *compiler) get(ctx context.Context, key string, rt *runtime, wasm []byte) (*compiled, error) {
	for {
		if e, ok := c.cache.Get(key); ok && e.acquire() {
			return e, nil
		}
		v, err, _ := c.flight.Do(key, func() (any, error) {
			if e, ok := c.cache.Peek(key); ok {
				return e, nil
			}
			var cm wazero.CompiledModule
			var err error
			code := machineCode.measure(func() { cm, err = rt.r.CompileModule(ctx, wasm) })
			if c.freed != nil {
				c.freed() // a compile leaves garbage: tens of MiB for a Go guest
			}
			if err != nil {
				return nil, err
			}
			e := &compiled{cm: cm, refs: 1, onClose: c.freed, codeBytes: code} // the cache's reference
			c.cache.Add(key, e)
			return e, nil
		})
		if err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() == nil {
				// The flight was another caller's, who gave up (a module
				// closed during its background compile): compile anew.
				continue
			}
			return nil, err
		}
		if e := v.(*compiled); e.acquire() {
			return e, nil
		}
		// Evicted between compile and acquire: try again.
	}
}

// codeBytes returns the machine code of key's compiled module when it is
// in the cache and its size is known; 0 otherwise.
func (c *compiler) codeBytes(key string) uint64 {
	if e, ok := c.cache.Peek(key); ok && e.codeBytes > 0 {
		return uint64(e.codeBytes)
	}
	return 0
}

// cached says whether key's compiled module is in the cache now.
func (c *compiler) cached(key string) bool { return c.cache.Contains(key) }

// purge drops every cached module (each closes when its instances are gone).
func (c *compiler) purge() { c.cache.Purge() }
