package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/wasm/abi"
	"github.com/tetratelabs/wazero/api"
)

// ModuleConfig is what the operator sets for one module. Zero values mean
// the documented defaults.
type ModuleConfig struct {
	// MemoryLimitPages caps the guest's linear memory in 64 KiB pages
	// (default 1024, i.e. 64 MiB). A guest that needs more fails the call
	// with MemoryExceeded; the host lives on.
	MemoryLimitPages uint32
	// AllowedHosts lists the hosts ("api.example.com" or "host:port") the
	// module's outbound HTTP may reach. Default: none (deny all).
	AllowedHosts []string
	// Config holds values handed to the guest through config_get.
	Config map[string]string
	// InitTimeout bounds the guest's _initialize (default 10s).
	InitTimeout time.Duration
}

func (c ModuleConfig) withDefaults() ModuleConfig {
	if c.MemoryLimitPages == 0 {
		c.MemoryLimitPages = DefaultMemoryLimitPages
	}
	if c.InitTimeout <= 0 {
		c.InitTimeout = DefaultInitTimeout
	}
	return c
}

// Module is a loaded guest module: validated, described, with a pool of
// instances. It is safe for concurrent use.
type Module struct {
	s        *Sandbox
	name     string
	sha256   string
	code     []byte // what is compiled: the upload, rewritten by the loop guard
	guard    string // how deadlines stop guest code in this module
	cacheKey string
	cfg      ModuleConfig
	desc     abi.Description
	pool     *pool

	// tier is what new instances are made from; the background compile
	// (tierUp) is its one writer after Load. stopTierUp cancels that
	// compile, tierDone is closed when it has ended (nil: none started).
	tier atomic.Pointer[tier]
	// tierMu orders the changes of tier after Load's (the switch to the
	// compiled code, letting the interpreter's form go, compiling it again)
	// and Close's release of the form.
	tierMu     sync.Mutex
	stopTierUp context.CancelFunc
	tierDone   chan struct{}
	// stopWarm and warmDone are warmUp's, as stopTierUp and tierDone
	// are tierUp's (nil: the module was started in the foreground).
	stopWarm context.CancelFunc
	warmDone chan struct{}
	// warming is set while warmUp makes the first instance (it holds the
	// compile slot): a call that comes meanwhile waits for that instance
	// (awaitWarm) instead of making one beside it.
	warming atomic.Bool
	closed  atomic.Bool

	created, live, peak atomic.Int64 // instance counts, for Stats and tests
	// freshBytes is the linear memory of the last instance made, after its
	// _initialize: what memoryHint sizes the next one's from; grows is set
	// once one of them grew after it (sawMemory).
	freshBytes atomic.Uint64
	grows      atomic.Bool
	// growStep is the largest single growth of an instance's memory seen
	// (linearMemory.Reallocate): the room past the recycling size that
	// memoryHint leaves, for the growth that crosses it.
	growStep atomic.Uint64
	// spare is the memory of the last instance replaced for its growth,
	// for the next one made (spareMemory); nil: none.
	spare atomic.Pointer[spareMemory]
	// instanceBytes is the linear memory of the live instances, each as of
	// its last call (sawMemory) or its making.
	instanceBytes atomic.Int64
}

// Stats counts a module's instances and the memory its pool holds.
type Stats struct {
	Live    int64 // instances that exist now (idle or serving a call)
	Idle    int   // instances waiting for a call
	Created int64 // instances created since load (a trap, timeout or idle release ends one)

	// IdleMemoryBytes is the linear memory the idle instances hold, summed;
	// MaxIdleMemoryBytes is the largest of them.
	IdleMemoryBytes, MaxIdleMemoryBytes uint64
	// MemoryLimitBytes is the module's memory limit; RecycleMemoryBytes is
	// the memory at which an instance is closed after its call instead of
	// going back to the pool (Config.RecycleMemoryFraction of the limit).
	MemoryLimitBytes, RecycleMemoryBytes uint64
	// RecycleGrowth is the growth at which an instance is closed after its
	// call: its memory this many times what it had when made
	// (Config.RecycleGrowth; 0: never for growth alone).
	RecycleGrowth float64
	// ClosedFailed, ClosedMemory and ClosedIdle count the instances closed
	// since load because their call failed (trap, timeout, memory
	// exceeded, canceled), because their memory reached RecycleMemoryBytes
	// or grew to RecycleGrowth times its fresh size, and because they sat
	// idle past Config.IdleTimeout (or, on the interpreter, when another
	// module's upload came: Module.letFormGo).
	ClosedFailed, ClosedMemory, ClosedIdle int64
	// ClosedTierUp counts the interpreter instances closed once the
	// module's compiled code was ready: the idle ones at the switch, the
	// others as they came back from their calls.
	ClosedTierUp int64

	// What the module holds in memory: InstanceMemoryBytes is the linear
	// memory of its live instances, idle or busy, each as of its last call;
	// CodeBytes is its module as compiled (the upload, rewritten by the loop
	// guard), which the sandbox keeps to compile again; MachineCodeBytes is
	// its compiled code, as measured when it was compiled (0 while it runs
	// on the interpreter, whose form is on the Go heap and not measured, and
	// when not known: MachineCodeBytes, the function, has the process's).
	InstanceMemoryBytes, CodeBytes, MachineCodeBytes uint64
}

// Stats returns the module's instance counts and what it holds in memory.
func (m *Module) Stats() Stats {
	st := Stats{Live: m.live.Load(), Created: m.created.Load(), MemoryLimitBytes: uint64(m.cfg.MemoryLimitPages) * wasmPageSize,
		InstanceMemoryBytes: uint64(max(m.instanceBytes.Load(), 0)), CodeBytes: uint64(len(m.code))}
	if !m.tier.Load().interpreted() {
		st.MachineCodeBytes = m.s.comp.codeBytes(m.cacheKey)
	}
	m.pool.stats(&st)
	return st
}

func (m *Module) instanceOpened() {
	m.created.Add(1)
	n := m.live.Add(1)
	for {
		p := m.peak.Load()
		if n <= p || m.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (m *Module) peakInstances() int64    { return m.peak.Load() }
func (m *Module) liveInstances() int64    { return m.live.Load() }
func (m *Module) createdInstances() int64 { return m.created.Load() }

// Name returns the name the module was loaded under.
func (m *Module) Name() string { return m.name }

// SHA256 returns the hex sha256 of the uploaded bytes.
func (m *Module) SHA256() string { return m.sha256 }

// Description returns what the module said about itself at load.
func (m *Module) Description() abi.Description { return m.desc }

// DeadlineGuard says how deadlines stop this module's code: "loop-guard",
// "close-on-done" or "none".
func (m *Module) DeadlineGuard() string { return m.guard }

var wasmMagic = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// Load validates, compiles and describes a module. Errors wrap ErrNotWasm,
// ErrInvalidModule or ErrABI with a message that names the problem.
//
// Under Config.Tiering's default, a module whose compiled code is not cached
// is compiled for wazero's interpreter, which takes a fraction of the
// optimizing compile, and Load returns with it; the optimizing compile runs
// in the background and the module's pool moves onto it when it is done
// (Module.Tier). A cached module (in memory, or on disk from an earlier
// run) starts compiled.
//
// A module loaded before over the same cache directory, from the same bytes
// and configuration, whose machine code is cached, is not run before Load
// returns: its description is the one recorded then, and its compile and
// first instance are made in the background (calls that come first wait for
// them). Load then costs the hash and a few file reads.
func (s *Sandbox) Load(ctx context.Context, name string, wasm []byte, mc ModuleConfig) (*Module, error) {
	if !bytes.HasPrefix(wasm, wasmMagic) {
		if bytes.HasPrefix(wasm, wasmMagic[:4]) {
			return nil, fmt.Errorf("%w: unsupported binary format version % x", ErrNotWasm, wasm[4:min(8, len(wasm))])
		}
		return nil, fmt.Errorf("%w: the bytes do not start with \\0asm (got % x)", ErrNotWasm, wasm[:min(8, len(wasm))])
	}
	mc = mc.withDefaults()
	if mc.MemoryLimitPages > abi.MaxMemoryPages {
		return nil, fmt.Errorf("sandbox: memory limit of %d pages: more than a 32-bit WebAssembly memory has (%d pages, 4 GiB)", mc.MemoryLimitPages, abi.MaxMemoryPages)
	}
	sum := sha256.Sum256(wasm)
	m := &Module{s: s, name: name, sha256: hex.EncodeToString(sum[:]), cfg: mc}
	m.pool = s.newPool(m, mc.MemoryLimitPages)

	code, guard, err := s.guardDeadlines(wasm, sum)
	if err != nil {
		return nil, err
	}
	m.code, m.guard = code, guard
	m.cacheKey = fmt.Sprintf("%s/%d/%s", m.sha256, mc.MemoryLimitPages, guard)
	key := runtimeKey{memoryPages: mc.MemoryLimitPages, closeOnDone: guard == guardCloseOnDone}
	compiledRT, err := s.runtimeFor(ctx, key)
	if err != nil {
		return nil, err
	}
	start := &tier{name: TierCompiled, rt: compiledRT}
	m.tier.Store(start)
	codeCached := s.comp.cached(m.cacheKey) || s.marks.has(m.cacheKey)
	recKey := knownKey(m.sha256, guard, mc)
	if rec, ok := s.loadKnown(recKey, codeCached); ok {
		m.desc = rec.desc
		m.freshBytes.Store(rec.freshBytes)
		m.warmUp(ctx)
		s.modules.Store(m, struct{}{})
		return m, nil
	}
	// Compiles and runs guest code from here: background compiles give way.
	defer s.fg.enter()()
	tierUp := s.cfg.Tiering == TierUp && !codeCached
	if tierUp {
		// This upload's interpreter form is the largest thing it makes: the
		// forms of the modules that wait for their compiles go first.
		s.letFormsGo()
		if start, err = s.interpreterTier(ctx, key, m.code); err != nil {
			return nil, err
		}
		m.tier.Store(start)
	}
	if err := m.start(ctx); err != nil {
		if start.interp != nil {
			start.interp.release()
		}
		return nil, err
	}
	if err := s.known.store(recKey, &known{desc: m.desc, freshBytes: m.freshBytes.Load()}); err != nil {
		s.cfg.Logger.Warn("what the module described is not kept", "module", name, "err", err.Error())
	}
	if tierUp {
		bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
		m.stopTierUp, m.tierDone = cancel, make(chan struct{})
		go m.tierUp(bg, compiledRT)
	} else {
		s.marks.mark(m.cacheKey) // compiled in the foreground, into the cache
	}
	s.modules.Store(m, struct{}{})
	return m, nil
}

// loadKnown returns the record of the module under key when its machine
// code is cached (codeCached): without it the background start would be a
// whole compile, and the module starts in the foreground.
func (s *Sandbox) loadKnown(key string, codeCached bool) (known, bool) {
	if !codeCached {
		return known{}, false
	}
	return s.known.load(key)
}

// warmUp makes, in the background, the first instance of a module loaded
// from its record (knownModules): the compile from the cache and the guest's
// _initialize run while the caller stores and deploys the module, in the
// sandbox's background compile slot (a restart warms its modules one at a
// time). A call that comes before warmUp has the slot makes its own
// instance, joining any compile under way; one that comes while warmUp
// makes the instance waits for it (awaitWarm).
// A failure is logged; calls meet it again and fail with it.
func (m *Module) warmUp(ctx context.Context) {
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.stopWarm, m.warmDone = cancel, make(chan struct{})
	go func() {
		defer close(m.warmDone)
		if !passGate(bg, m.s.cfg.warmGate) || !m.s.takeCompileSlot(bg) {
			return
		}
		m.warming.Store(true)
		defer m.warming.Store(false) // once the instance is in the pool, before warmDone closes
		if !passGate(bg, m.s.cfg.warmMakeGate) {
			m.s.giveCompileSlot()
			return
		}
		inst, err := m.pool.acquire(bg, time.Time{})
		m.s.giveCompileSlot()
		if err != nil {
			if bg.Err() == nil && !errors.Is(err, ErrClosed) {
				m.s.cfg.Logger.Error("the first instance of a known module failed", "module", m.name, "err", err.Error())
			}
			return
		}
		m.pool.put(inst, false)
	}()
}

// passGate waits for a test's gate (nil: none) to open; false if ctx
// ended first.
func passGate(ctx context.Context, gate <-chan struct{}) bool {
	if gate == nil {
		return true
	}
	select {
	case <-gate:
		return true
	case <-ctx.Done():
		return false
	}
}

// awaitWarm waits, for a call that came while warmUp makes the module's
// first instance, until that instance is in the pool (or warmUp failed),
// ctx ends or deadline passes (zero: none). A call that made its own
// instance meanwhile would join the compile and then run a second
// _initialize beside warmUp's, on the cores the first call waits for; its
// instance would also stay in the pool beside warmUp's.
func (m *Module) awaitWarm(ctx context.Context, deadline time.Time) error {
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-m.warmDone:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		return context.DeadlineExceeded
	}
}

// interpreterTier compiles code for wazero's interpreter, in a runtime like
// the compiler's of key.
func (s *Sandbox) interpreterTier(ctx context.Context, key runtimeKey, code []byte) (*tier, error) {
	key.interpreter = true
	rt, err := s.runtimeFor(ctx, key)
	if err != nil {
		return nil, err
	}
	cm, err := rt.r.CompileModule(ctx, code)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidModule, err)
	}
	// Its form is the largest thing a module holds (~60 MiB of heap for a Go
	// guest): once the last reference goes, give it back to the OS.
	return &tier{name: TierInterpreter, rt: rt, interp: &compiled{cm: cm, refs: 1, onClose: s.osMem.release}}, nil
}

// start checks the module's shape on its first tier, makes its first
// instance and asks it for the module's description.
func (m *Module) start(ctx context.Context) error {
	_, c, err := m.compiledFor(ctx)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidModule, err)
	}
	err = checkShape(c.cm.ImportedFunctions(), c.cm.ExportedFunctions())
	if err == nil {
		err = checkMemories(c.cm, m.cfg.MemoryLimitPages)
	}
	c.release()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrABI, err)
	}
	inst, err := m.newInstance(ctx, time.Time{})
	if err != nil {
		return err
	}
	if m.desc, err = describe(ctx, inst); err != nil {
		inst.close()
		return fmt.Errorf("%w: %v", ErrABI, err)
	}
	m.pool.add(inst)
	return nil
}

// Close releases the module's instances; calls in flight finish first. A
// background compile still running is cancelled, and has ended when Close
// returns.
func (m *Module) Close(context.Context) error {
	if m.closed.Swap(true) {
		return nil
	}
	m.s.modules.Delete(m)
	if m.tierDone != nil {
		m.stopTierUp()
		<-m.tierDone
	}
	if m.warmDone != nil {
		m.stopWarm()
		<-m.warmDone
	}
	m.pool.close()
	m.dropSpare(true)
	m.tierMu.Lock()
	if t := m.tier.Load(); t.interp != nil {
		t.interp.release()
	}
	m.tierMu.Unlock()
	m.s.osMem.release() // its instances' memories
	return nil
}

type signature struct{ params, results []api.ValueType }

var requiredExports = map[string]signature{
	abi.ExportABIVersion: {nil, []api.ValueType{api.ValueTypeI32}},
	abi.ExportAlloc:      {[]api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}},
	abi.ExportDescribe:   {nil, []api.ValueType{api.ValueTypeI64}},
	abi.ExportHandle:     {[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}},
	abi.ExportInitialize: {nil, nil},
}

// checkShape refuses a module that lacks an export of the ABI, exports one
// with the wrong signature, or imports something the host does not provide.
func checkShape(imports []api.FunctionDefinition, exports map[string]api.FunctionDefinition) error {
	var problems []string
	for _, name := range []string{abi.ExportABIVersion, abi.ExportAlloc, abi.ExportDescribe, abi.ExportHandle, abi.ExportInitialize} {
		want := requiredExports[name]
		f, ok := exports[name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("missing export %s", name))
		case !slices.Equal(f.ParamTypes(), want.params) || !slices.Equal(f.ResultTypes(), want.results):
			problems = append(problems, fmt.Sprintf("export %s has signature %s, want %s", name, sig(f.ParamTypes(), f.ResultTypes()), sig(want.params, want.results)))
		}
	}
	for _, f := range imports {
		mod, name, _ := f.Import()
		switch {
		case mod == abi.HostModule && slices.Contains(abi.HostImports, name):
		case mod == "wasi_snapshot_preview1":
		default:
			problems = append(problems, fmt.Sprintf("imports %s.%s, which this host does not provide", mod, name))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func sig(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return strings.Join(s, ", ")
	}
	return "(" + names(params) + ") -> (" + names(results) + ")"
}

// describe asks a fresh instance for its ABI version and description.
func describe(ctx context.Context, inst *instance) (abi.Description, error) {
	var d abi.Description
	v, err := inst.mod.ExportedFunction(abi.ExportABIVersion).Call(ctx)
	if err != nil {
		return d, fmt.Errorf("%s: %v", abi.ExportABIVersion, err)
	}
	if uint32(v[0]) != abi.Version {
		return d, fmt.Errorf("module speaks ABI version %d; this host speaks version %d", uint32(v[0]), abi.Version)
	}
	r, err := inst.mod.ExportedFunction(abi.ExportDescribe).Call(ctx)
	if err != nil {
		return d, fmt.Errorf("%s: %v", abi.ExportDescribe, err)
	}
	ptr, n := abi.Unpack(r[0])
	if n == 0 {
		return d, errors.New("the module registered no processor (call berth.Register from an init function)")
	}
	b, ok := inst.mod.Memory().Read(ptr, n)
	if !ok {
		return d, fmt.Errorf("%s returned a description outside guest memory", abi.ExportDescribe)
	}
	if d, err = abi.DecodeDescription(b); err != nil {
		return d, fmt.Errorf("description: %v", err)
	}
	if err := d.Validate(); err != nil {
		return d, fmt.Errorf("description: %v", err)
	}
	return d, nil
}
