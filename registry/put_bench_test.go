package registry_test

import (
	"context"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"testing"
	"time"

	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/sandbox"
)

// BenchmarkPut measures a module's upload as the REST API makes it
// (Registry.Put on a whole host with the default configuration: tier-up,
// store.sync "always"), for registry/testdata/eachevent, a small Go
// module: on a fresh host with no compilation cache (fresh), on a fresh
// host whose cache directory holds the module's compiled code (cached),
// and again with the same bytes on the same host (again).
//
//	go test ./registry -run '^$' -bench BenchmarkPut -benchtime 10x -cpuprofile /tmp/put.prof
func BenchmarkPut(b *testing.B) {
	wasm, err := testbuild.Bytes("registry/testdata/eachevent")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	open := func(b *testing.B, cache string) *assembly.Host {
		cfg := config.Default()
		cfg.Server.DataDir = b.TempDir()
		asm, err := assembly.Open(ctx, cfg, assembly.Options{WasmCacheDir: cache})
		if err != nil {
			b.Fatal(err)
		}
		return asm
	}
	put := func(b *testing.B, asm *assembly.Host) {
		if _, _, err := asm.Modules.Put(ctx, "each-event", wasm); err != nil {
			b.Fatal(err)
		}
	}
	compiled := func(asm *assembly.Host) bool {
		for _, m := range asm.Sandbox.Modules() {
			if m.Tier() != sandbox.TierCompiled {
				return false
			}
		}
		return true
	}
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			asm := open(b, b.TempDir())
			b.StartTimer()
			put(b, asm)
			b.StopTimer()
			asm.Close(ctx)
			b.StartTimer()
		}
	})
	b.Run("cached", func(b *testing.B) {
		cache := b.TempDir()
		first := open(b, cache)
		put(b, first)
		// The optimizing compile runs after the upload; a Close would
		// cancel it before it fills the cache.
		checkfor.Nil(b, time.Minute, 10*time.Millisecond, func() error {
			if !compiled(first) {
				return fmt.Errorf("the optimizing compile has not filled the cache")
			}
			return nil
		})
		first.Close(ctx)
		for b.Loop() {
			b.StopTimer()
			asm := open(b, cache)
			b.StartTimer()
			put(b, asm)
			b.StopTimer()
			asm.Close(ctx)
			b.StartTimer()
		}
	})
	b.Run("again", func(b *testing.B) {
		asm := open(b, b.TempDir())
		defer asm.Close(ctx)
		put(b, asm)
		for b.Loop() {
			put(b, asm)
		}
	})
}
