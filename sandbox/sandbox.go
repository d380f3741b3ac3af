// Package sandbox runs Berth guest modules (WebAssembly, ABI v1) under wazero
// with the limits a production host needs: a deadline on every call that
// stops spinning, sleeping, waiting and host-blocked guests alike, a memory
// limit per module, a pool of instances per module, compile-once with an
// on-disk cache and an LRU of compiled modules, and typed outcomes.
//
// The sandbox reports what happened; it does not decide retries.
package sandbox

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/tetratelabs/wazero"
)

// Config configures a Sandbox. Zero values mean the documented defaults.
type Config struct {
	// CacheDir holds wazero's on-disk compilation cache and, beside it in
	// berth-loopguard/, the loop guard's rewrite of each module, keyed by
	// the upload's sha256 (default: none, so every process start rewrites
	// and compiles again; the host sets <data>/wasm-cache).
	CacheDir string
	// CompiledModules is the size of the LRU of compiled modules (default 32).
	CompiledModules int
	// MaxInstances caps the instances of one module, i.e. its concurrent
	// calls (default 8). Calls beyond it wait for a free instance.
	MaxInstances int
	// IdleTimeout releases an instance idle for this long (default 1m), so
	// that the instances a burst of calls needed do not stay after it.
	IdleTimeout time.Duration
	// RecycleMemoryFraction closes an instance after its call, instead of
	// pooling it, when its linear memory has reached this fraction of its
	// module's memory limit (default 0.5; above 1 counts as 1, recycling only
	// instances at the limit). WebAssembly memory never shrinks, so without
	// it an instance that once needed much would hold it for as long as
	// calls keep it from going idle. An instance whose call failed (trap,
	// timeout, memory exceeded) is always closed.
	RecycleMemoryFraction float64
	// RecycleGrowth closes an instance after its call, instead of pooling
	// it, when its linear memory has grown to this many times what it had
	// when it was made, after _initialize (default 1.25; negative, or 1 and
	// below: never for growth alone). A guest's heap may creep up over many
	// calls (a Go guest's does, and its memory never shrinks), so a busy
	// instance, which never goes idle, would hold the most it ever reached;
	// a ratio, not a size, as what is too much depends on the guest.
	RecycleGrowth float64
	// Clock tells the time of the idle release: when an instance went back
	// to its pool, and which instances are idle past IdleTimeout (default
	// clock.Real()). The janitor reads it every IdleTimeout/4 of real time;
	// the package's tests set a clock of their own and run the sweep directly.
	Clock clock.Clock
	// MaxOutputBytes bounds what one call may write to stdout and to stderr;
	// the rest is dropped and counted (default 16 KiB each).
	MaxOutputBytes int
	// MaxResponseBytes caps an outbound HTTP response body (default 1 MiB).
	MaxResponseBytes int64
	// HTTPTransport sends outbound requests (default: a clone of
	// http.DefaultTransport).
	HTTPTransport http.RoundTripper
	// Logger receives guest logs and output (default slog.Default()).
	Logger *slog.Logger
	// Deadlines selects how deadlines stop running guest code (default
	// DeadlinesLoopGuard, falling back to DeadlinesCloseOnDone for modules
	// the loop guard cannot rewrite).
	Deadlines DeadlineMode
	// Tiering selects how a module whose compiled code is not cached starts
	// (default CompiledOnly: compiled before Load returns; TierUp: on the
	// interpreter at once, compiled in the background).
	Tiering TieringMode
	// CapsuleMaxBytes caps the encoded size of a failed call's attempt
	// capsule (default 256 KiB; Outcome.Capsule): past it the capsule's
	// bodies are cut, then its later calls, clock readings and random
	// bytes left out, each cut noted in Capsule.Truncated.
	CapsuleMaxBytes int
	// CapsuleRedactHeaders names the HTTP headers, request and response,
	// whose values a capsule stores as "[redacted]" (case-insensitive;
	// default DefaultCapsuleRedactHeaders; an empty, non-nil list redacts
	// none).
	CapsuleRedactHeaders []string
	// CapsuleRedactConfig are patterns (path.Match, case-insensitive) of
	// the config keys whose values a capsule stores as "[redacted]": a
	// module's secrets are config values, and a capsule is for readers
	// (default DefaultCapsuleRedactConfig; an empty, non-nil list redacts
	// none).
	CapsuleRedactConfig []string

	// tierUpGate, when set (by this package's tests), holds each module's
	// switch to compiled code, after its background compile, until it is
	// closed: a test keeps a module on the interpreter, or picks the moment
	// of the switch.
	tierUpGate <-chan struct{}
	// warmGate, when set (by this package's tests), holds the background
	// start of each module loaded from its record until it is closed: a
	// test sees the module before its first instance exists.
	warmGate <-chan struct{}
	// warmMakeGate, when set (by this package's tests), holds that start
	// once it has the compile slot, before it makes the first instance: a
	// test sees a call come while the first instance is being made.
	warmMakeGate <-chan struct{}
}

// Defaults of Config's zero values; config's [sandbox] defaults are these.
const (
	DefaultCompiledModules  = 32
	DefaultMaxInstances     = 8
	DefaultIdleTimeout      = time.Minute
	DefaultMaxOutputBytes   = 16 << 10
	DefaultMaxResponseBytes = 1 << 20
)

// DefaultCapsuleMaxBytes is Config.CapsuleMaxBytes's default.
const DefaultCapsuleMaxBytes = 256 << 10

// DefaultCapsuleRedactHeaders returns Config.CapsuleRedactHeaders's
// default: the headers that carry credentials. Each call returns a new
// slice, so that no Config shares (and changes) the default.
func DefaultCapsuleRedactHeaders() []string {
	return []string{"Authorization", "Cookie", "Proxy-Authorization", "Set-Cookie"}
}

// DefaultCapsuleRedactConfig returns Config.CapsuleRedactConfig's default:
// keys that name credentials. Each call returns a new slice.
func DefaultCapsuleRedactConfig() []string {
	return []string{"*token*", "*secret*", "*password*", "*passwd*", "*credential*", "*api-key*", "*apikey*", "*private-key*"}
}

// Defaults of ModuleConfig's zero values; config's [modules.<name>]
// defaults are these.
const (
	DefaultMemoryLimitPages = 1024 // 64 MiB
	DefaultInitTimeout      = 10 * time.Second
)

// DefaultRecycleMemoryFraction is Config.RecycleMemoryFraction's default:
// an instance that grew to half its memory limit is not kept.
const DefaultRecycleMemoryFraction = 0.5

// DefaultRecycleGrowth is Config.RecycleGrowth's default: an instance
// whose memory grew by a quarter over its fresh size is replaced. For the
// benchmark sample, a Go guest that starts at 3.25 MiB, that keeps a busy
// instance at or under 4 MiB of linear memory (5.25 MiB resident, issue
// 11's goal is 6), replacing it every ~800 calls; 1.5 peaked at 6.3 MiB
// (docs/BENCHMARKS.md, BenchmarkSteadyStateMemory).
const DefaultRecycleGrowth = 1.25

// wasmPageSize is the size of a WebAssembly memory page.
const wasmPageSize = 65536

// DeadlineMode selects the mechanism that stops guest code at a deadline.
type DeadlineMode int

const (
	// DeadlinesLoopGuard rewrites each module so that its loops call the
	// host every few thousand iterations; the host ends the call there once
	// the deadline has passed. Cheapest; the default.
	DeadlinesLoopGuard DeadlineMode = iota
	// DeadlinesCloseOnDone uses wazero's WithCloseOnContextDone, which checks
	// at every loop header (several times slower).
	DeadlinesCloseOnDone
	// DeadlinesNone runs guest code unbounded: sleeps and host calls still
	// end at the deadline, a spinning loop does not. For benchmarks only.
	DeadlinesNone
)

func (c Config) withDefaults() Config {
	if c.CompiledModules <= 0 {
		c.CompiledModules = DefaultCompiledModules
	}
	if c.MaxInstances <= 0 {
		c.MaxInstances = DefaultMaxInstances
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if !(c.RecycleMemoryFraction > 0) { // zero, negative or NaN
		c.RecycleMemoryFraction = DefaultRecycleMemoryFraction
	}
	c.RecycleMemoryFraction = min(c.RecycleMemoryFraction, 1)
	switch {
	case c.RecycleGrowth == 0 || c.RecycleGrowth != c.RecycleGrowth: // zero or NaN
		c.RecycleGrowth = DefaultRecycleGrowth
	case c.RecycleGrowth <= 1:
		c.RecycleGrowth = 0 // off: the pool never recycles for growth alone
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	if c.MaxOutputBytes <= 0 {
		c.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.HTTPTransport == nil {
		c.HTTPTransport = http.DefaultTransport.(*http.Transport).Clone()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.CapsuleMaxBytes <= 0 {
		c.CapsuleMaxBytes = DefaultCapsuleMaxBytes
	}
	if c.CapsuleRedactHeaders == nil {
		c.CapsuleRedactHeaders = DefaultCapsuleRedactHeaders()
	}
	if c.CapsuleRedactConfig == nil {
		c.CapsuleRedactConfig = DefaultCapsuleRedactConfig()
	}
	return c
}

// Sandbox compiles and runs guest modules. It is safe for concurrent use.
type Sandbox struct {
	cfg    Config
	cache  wazero.CompilationCache // shared by every runtime; nil without CacheDir
	guards *guardStore             // the loop guard's rewrites; nil without CacheDir
	marks  *compiledMarks          // which modules the on-disk cache holds; nil without CacheDir
	known  *knownModules           // what earlier loads learnt of modules; nil without CacheDir
	comp   *compiler
	osMem  *osMemory // gives what the sandbox frees back to the OS
	// compileSlot is held by the one background compile (or warm start)
	// running at a time: the others wait their turn, so that a host given
	// many modules at once does not share its processors out among all
	// their compiles, while the uploads that come meanwhile wait for CPU.
	compileSlot chan struct{}
	fg          *foreground // the Loads in the foreground, to which background compiles give way

	mu       sync.Mutex
	runtimes map[runtimeKey]*runtime
	closed   bool

	stopJanitor context.CancelFunc
	janitorDone chan struct{}
	modules     sync.Map // *Module → struct{}, for the idle janitor
}

// New returns a sandbox. Close it to release compiled code and instances.
func New(cfg Config) (*Sandbox, error) {
	cfg = cfg.withDefaults()
	s := &Sandbox{cfg: cfg, runtimes: map[runtimeKey]*runtime{}, osMem: newOSMemory(), compileSlot: make(chan struct{}, 1), fg: newForeground()}
	if cfg.CacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("sandbox: compilation cache in %s: %w", cfg.CacheDir, err)
		}
		s.cache = cache
		s.guards = newGuardStore(cfg.CacheDir)
		s.marks = newCompiledMarks(cfg.CacheDir)
		s.known = newKnownModules(cfg.CacheDir)
	}
	s.osMem.quiet = s.fg.waitQuiet
	comp, err := newCompiler(cfg.CompiledModules, s.osMem.release)
	if err != nil {
		return nil, err
	}
	s.comp = comp
	ctx, cancel := context.WithCancel(context.Background())
	s.stopJanitor = cancel
	s.janitorDone = make(chan struct{})
	go s.janitor(ctx)
	go s.osMem.run(ctx)
	return s, nil
}

// Close stops every module's instances and releases compiled code.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	rts := s.runtimes
	s.runtimes = nil
	s.mu.Unlock()

	s.stopJanitor()
	<-s.janitorDone
	<-s.osMem.done
	s.modules.Range(func(k, _ any) bool {
		k.(*Module).Close(ctx)
		return true
	})
	s.comp.purge()
	var first error
	for _, rt := range rts {
		if err := rt.r.Close(ctx); err != nil && first == nil {
			first = err
		}
	}
	if s.cache != nil {
		if err := s.cache.Close(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// janitor releases idle instances, looking every IdleTimeout/4.
func (s *Sandbox) janitor(ctx context.Context) {
	defer close(s.janitorDone)
	t := time.NewTicker(max(s.cfg.IdleTimeout/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.releaseIdle()
		}
	}
}

// releaseIdle closes every module's instances that have been idle longer
// than IdleTimeout by the sandbox's clock, and gives their memory back to
// the OS.
func (s *Sandbox) releaseIdle() {
	cutoff := s.cfg.Clock.Now().Add(-s.cfg.IdleTimeout)
	closed := 0
	s.modules.Range(func(k, _ any) bool {
		m := k.(*Module)
		closed += m.pool.releaseIdle(cutoff)
		if m.dropSpare(false) {
			closed++
		}
		return true
	})
	if closed > 0 {
		s.osMem.release()
	}
}

// newPool returns the pool of module m, whose memory limit is limitPages.
func (s *Sandbox) newPool(m *Module, limitPages uint32) *pool {
	limit := float64(limitPages) * wasmPageSize
	return newPool(s.cfg.MaxInstances, uint64(limit*s.cfg.RecycleMemoryFraction), s.cfg.RecycleGrowth, s.cfg.Clock, m.newInstance, m.stale)
}

// Modules returns the modules loaded and not closed, by name (a module
// being replaced under the same name appears twice until it is closed).
func (s *Sandbox) Modules() []*Module {
	var ms []*Module
	s.modules.Range(func(k, _ any) bool {
		ms = append(ms, k.(*Module))
		return true
	})
	slices.SortFunc(ms, func(a, b *Module) int { return strings.Compare(a.name, b.name) })
	return ms
}
