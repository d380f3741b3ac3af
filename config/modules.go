package config

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/sandbox"
)

// Defaults of [modules.<name>] (those of sandbox.ModuleConfig).
const (
	DefaultMemoryLimit = sandbox.DefaultMemoryLimitPages * WasmPage
	DefaultInitTimeout = retry.Duration(sandbox.DefaultInitTimeout)
	// WasmPage is the size of a WebAssembly memory page; a memory limit is a whole number of pages.
	WasmPage = 64 * KiB
	// MaxMemoryLimit is the most a 32-bit WebAssembly memory can hold (65536 pages).
	MaxMemoryLimit = 4 * GiB
)

// Defaults of [sandbox] (those sandbox.New takes for zero values).
const (
	DefaultCompiledModules = sandbox.DefaultCompiledModules
	DefaultMaxInstances    = sandbox.DefaultMaxInstances
	DefaultIdleTimeout     = retry.Duration(sandbox.DefaultIdleTimeout)
	// DefaultRecycleMemoryPercent is sandbox.DefaultRecycleMemoryFraction in percent.
	DefaultRecycleMemoryPercent = 50
	// DefaultRecycleGrowth is sandbox.DefaultRecycleGrowth, sandbox.recycle-growth's default.
	DefaultRecycleGrowth = sandbox.DefaultRecycleGrowth
	// MaxRecycleGrowth bounds sandbox.recycle-growth: beyond it the key would mean "never" in all but name.
	MaxRecycleGrowth   = 1000
	DefaultMaxOutput   = sandbox.DefaultMaxOutputBytes
	DefaultMaxResponse = sandbox.DefaultMaxResponseBytes
)

// ModuleConfig is [modules.<name>]: what the operator sets for one module. A module without a table
// gets [DefaultModule]; a key left out of a table keeps its default.
type ModuleConfig struct {
	// MemoryLimit caps the guest's linear memory (default 64MiB); a multiple of 64KiB, at most 4GiB. A
	// guest that needs more fails the call with MemoryExceeded.
	MemoryLimit Size `toml:"memory-limit"`
	// AllowedHosts lists the hosts the module's outbound HTTP may reach: "api.example.com" (any port),
	// "api.example.com:443", or "*" for any (default: none, deny all).
	AllowedHosts []string `toml:"allowed-hosts"`
	// Config holds string values handed to the guest through config_get (default: none).
	Config map[string]string `toml:"config"`
	// InitTimeout bounds the guest's initialization (default 10s).
	InitTimeout retry.Duration `toml:"init-timeout"`
}

// DefaultModule returns the settings of a module without a [modules.<name>] table: 64MiB of memory, no
// outbound hosts, no config values, 10s to initialize.
func DefaultModule() ModuleConfig {
	return ModuleConfig{MemoryLimit: DefaultMemoryLimit, InitTimeout: DefaultInitTimeout}
}

func (m *ModuleConfig) setDefaults() { *m = DefaultModule() }

// Module returns the sandbox settings of the module name: its [modules.<name>] table, or the defaults
// when it has none. The lists and maps are copies.
func (c *Config) Module(name string) sandbox.ModuleConfig {
	m, ok := c.Modules[name]
	if !ok {
		m = DefaultModule()
	}
	return sandbox.ModuleConfig{
		MemoryLimitPages: uint32(m.MemoryLimit / WasmPage),
		AllowedHosts:     slices.Clone(m.AllowedHosts),
		Config:           maps.Clone(m.Config),
		InitTimeout:      m.InitTimeout.Std(),
	}
}

func (m ModuleConfig) validate(p *problems, at keyPath) {
	if name := at[len(at)-1].name; name == "" || strings.TrimSpace(name) != name {
		p.add(at, "", "a module name must not be empty or start or end with a space")
	}
	k := at.key("memory-limit")
	switch v := fmt.Sprintf("%q", m.MemoryLimit.String()); {
	case m.MemoryLimit <= 0:
		p.add(k, v, "must be more than 0")
	case m.MemoryLimit%WasmPage != 0:
		p.add(k, v, "must be a multiple of 64KiB (the WebAssembly page size)")
	case m.MemoryLimit > MaxMemoryLimit:
		p.add(k, v, "must be at most 4GiB")
	}
	for i, h := range m.AllowedHosts {
		if err := checkHost(h, true); err != nil {
			p.add(at.key("allowed-hosts").at(i), fmt.Sprintf("%q", h), "%v", err)
		}
	}
	for _, key := range sortedKeys(m.Config) {
		if key == "" {
			p.add(at.key("config").key(key), "", "a config key must not be empty")
		}
	}
	positiveDuration(p, at.key("init-timeout"), m.InitTimeout)
}

// SandboxConfig is [sandbox]: limits of the WebAssembly sandbox. Changing it needs a restart.
type SandboxConfig struct {
	// CompiledModules is the size of the cache of compiled modules kept in memory (default 32).
	CompiledModules int `toml:"compiled-modules"`
	// MaxInstances caps the instances of one module, i.e. its concurrent calls (default 8).
	MaxInstances int `toml:"max-instances"`
	// IdleTimeout releases an instance idle for this long (default 1m), so a burst of calls does not pin
	// its instances' memory.
	IdleTimeout retry.Duration `toml:"idle-timeout"`
	// RecycleMemoryPercent closes an instance after its call, instead of keeping it for the next, when its
	// linear memory has grown to this percentage of its module's memory limit, 1 to 100 (default 50; 100
	// closes only instances at the limit). WebAssembly memory never shrinks.
	RecycleMemoryPercent int `toml:"recycle-memory-percent"`
	// RecycleGrowth closes an instance after its call, instead of keeping it for the next, when its
	// linear memory has grown to this many times its size when it was made (default 1.25; more than 1,
	// or 0 never to recycle for growth alone). A busy instance never goes idle, and a Go guest's heap
	// creeps up over many calls.
	RecycleGrowth float64 `toml:"recycle-growth"`
	// MaxOutput bounds what one call may write to stdout and to stderr; the rest is dropped (default 16KiB).
	MaxOutput Size `toml:"max-output"`
	// MaxResponse caps the body of an outbound HTTP response (default 1MiB).
	MaxResponse Size `toml:"max-response"`
	// TierUp starts a module that is not in the compilation cache on the interpreter at once and
	// compiles it in the background, switching when the compile is done (default true); an attempt
	// that runs past its timeout on the interpreter is not charged and is made again on compiled code.
	// false compiles before the module is ready, as a cold start's first call then runs at full speed.
	TierUp bool `toml:"tier-up"`
}

// Sandbox returns the settings for sandbox.New: [sandbox] and [capsule], with CacheDir
// <data-dir>/wasm-cache. The host adds the Logger (and, if it wants, an HTTP transport).
func (c *Config) Sandbox() sandbox.Config {
	s := c.SandboxConfig
	sc := sandbox.Config{
		CacheDir:        c.WasmCacheDir(),
		CompiledModules: s.CompiledModules,
		MaxInstances:    s.MaxInstances,
		IdleTimeout:     s.IdleTimeout.Std(),
		MaxOutputBytes:  int(s.MaxOutput),
		// The file says a whole percentage; the sandbox takes a fraction.
		RecycleMemoryFraction: float64(s.RecycleMemoryPercent) / 100,
		RecycleGrowth:         recycleGrowth(s.RecycleGrowth),
		MaxResponseBytes:      int64(s.MaxResponse),
		Tiering:               tiering(s.TierUp),
	}
	c.Capsule.capsule(&sc)
	return sc
}

// tiering is sandbox.Config.Tiering for sandbox.tier-up.
func tiering(tierUp bool) sandbox.TieringMode {
	if tierUp {
		return sandbox.TierUp
	}
	return sandbox.CompiledOnly
}

// recycleGrowth is sandbox.Config.RecycleGrowth for sandbox.recycle-growth: the file's 0 ("never")
// is the sandbox's negative, since the sandbox reads 0 as its own default.
func recycleGrowth(g float64) float64 {
	if g == 0 {
		return -1
	}
	return g
}

func (s SandboxConfig) validate(p *problems, at keyPath) {
	positiveInt(p, at.key("compiled-modules"), s.CompiledModules, 1<<16)
	positiveInt(p, at.key("max-instances"), s.MaxInstances, 1<<16)
	positiveDuration(p, at.key("idle-timeout"), s.IdleTimeout)
	positiveInt(p, at.key("recycle-memory-percent"), s.RecycleMemoryPercent, 100)
	switch g := s.RecycleGrowth; {
	case g == 0:
	case math.IsNaN(g) || math.IsInf(g, 0):
		p.add(at.key("recycle-growth"), render(g), "want a finite number")
	case g <= 1:
		p.add(at.key("recycle-growth"), render(g), "must be more than 1 (a factor of the instance's fresh memory), or 0 to turn it off")
	case g > MaxRecycleGrowth:
		p.add(at.key("recycle-growth"), render(g), "must be at most %d", MaxRecycleGrowth)
	}
	positiveSize(p, at.key("max-output"), s.MaxOutput)
	if s.MaxOutput > GiB {
		p.add(at.key("max-output"), fmt.Sprintf("%q", s.MaxOutput.String()), "must be at most 1GiB")
	}
	positiveSize(p, at.key("max-response"), s.MaxResponse)
}
