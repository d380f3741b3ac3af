// Package registry is the set of deployed modules: their bytes kept durably
// (a directory, or a store several hosts share and watch), loaded into the
// sandbox, and one subscription per handler running in the engine, each
// with its invoker: a reactor's plain call, a projection's call that
// writes its read model in the ledger, a saga's call whose commands go to
// the command gateway. Uploading a new version swaps the code under the
// same subscriptions, so checkpoints and parked aggregates carry over.
package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/diskspace"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/subscription"
	"github.com/berthhq/berth/wasm/abi"
)

// Errors of the registry.
var (
	// ErrInvalidName: a module name must be 1–64 letters, digits, '-' or '_'.
	ErrInvalidName = errors.New("invalid module name")
	// ErrUnknownModule: no module of that name is deployed.
	ErrUnknownModule = errors.New("unknown module")
	// ErrConflict: another module already serves the processor.
	ErrConflict = errors.New("conflicting module")
)

// Options configure a Registry.
type Options struct {
	Dir     string // where module bytes are kept (the host uses <data>/modules)
	Sandbox *sandbox.Sandbox
	Engine  *subscription.Engine
	// Settings returns the running configuration's settings (the host's
	// *config.Config), asked each time they are needed.
	Settings func() Settings
	Logger   *slog.Logger
	// Projections is the query store of projections' read models; nil:
	// a projection's key/value port answers Unsupported.
	Projections *Projections
	// Space refuses module uploads while the data directory is below its
	// free-space reserve (Put fails with its *diskspace.Error). Default
	// (nil): no reserve.
	Space *diskspace.Guard
	// Store keeps the modules' bytes and versions. Default (nil): files
	// in Dir.
	Store ModuleStore
	// Clock tells when a version was uploaded and times Watch's look at a
	// shared store every resyncEvery. Default (nil): the wall clock.
	Clock clock.Clock
	// Added, when set, is called after the registry added subscriptions to
	// the engine (a module deployed here or on another host with a handler
	// new to the engine), with the registry's lock held: it must not block
	// or call the registry. The host tells its cluster then, so that the
	// new subscriptions' partitions are shared out. Subscriptions are never
	// removed from the engine (a module's removal detaches them).
	Added func()
}

// Registry holds the deployed modules. It is safe for concurrent use.
type Registry struct {
	opts  Options
	store ModuleStore

	mu   sync.Mutex // serialises deploys; guards mods
	mods map[string]*deployed
}

type deployed struct {
	StoredModule
	mod *sandbox.Module
}

// HandlerInfo describes one handler of a module.
type HandlerInfo struct {
	Name         string   `json:"name"`
	EventTypes   []string `json:"eventTypes"`
	Subscription string   `json:"subscription,omitempty"` // empty for a saga's rejection handler
}

// Info describes a deployed module.
type Info struct {
	Name           string        `json:"name"`
	Version        int           `json:"version"`                  // numbers the module's uploads from 1
	RolledBackFrom int           `json:"rolledBackFrom,omitempty"` // the version a rollback deployed again
	SHA256         string        `json:"sha256"`
	Size           int           `json:"size"`
	Uploaded       time.Time     `json:"uploaded"`
	Processor      string        `json:"processor"`
	Kind           string        `json:"kind"`
	Start          string        `json:"start"`
	Handlers       []HandlerInfo `json:"handlers"`
	Subscriptions  []string      `json:"subscriptions"`
	DeadlineGuard  string        `json:"deadlineGuard"`
}

// Open loads every stored module and adds its subscriptions to the engine
// (call it before Engine.Start, so that every subscription starts together).
// A stored module that no longer loads is logged and left on disk.
func Open(ctx context.Context, opts Options) (*Registry, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Store == nil {
		fs, err := NewFileStore(opts.Dir, opts.Space)
		if err != nil {
			return nil, fmt.Errorf("registry: %w", err)
		}
		opts.Store = fs
	}
	r := &Registry{opts: opts, store: opts.Store, mods: map[string]*deployed{}}
	metas, codes, err := r.store.Current(ctx)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	for i, meta := range metas {
		mod, err := opts.Sandbox.Load(ctx, meta.Name, codes[i], opts.Settings().Module(meta.Name))
		if err != nil {
			opts.Logger.Error("stored module does not load; its subscriptions wait", "module", meta.Name, "error", err)
			continue
		}
		d := &deployed{StoredModule: meta, mod: mod}
		if err := r.subscribe(ctx, d, nil); err != nil {
			return nil, err
		}
		r.mods[meta.Name] = d
		logDeployed(opts.Logger, "loaded", d)
	}
	return r, nil
}

// Put deploys (or updates) the module name from its bytes, as its next
// version. Nothing is stored and the running version stays when the bytes do
// not load. The bytes of the version already current change nothing: Put
// answers that version at once, with no compile and no new version.
func (r *Registry) Put(ctx context.Context, name string, wasm []byte) (Info, bool, error) {
	if info, ok, err := r.current(ctx, name, wasm); ok || err != nil {
		return info, false, err
	}
	return r.put(ctx, name, wasm, 0)
}

// current returns name's running version when it has wasm's bytes and no
// later version is stored (by another host of a shared store, not yet
// deployed here); ok is false otherwise.
func (r *Registry) current(ctx context.Context, name string, wasm []byte) (Info, bool, error) {
	r.mu.Lock()
	d, ok := r.mods[name]
	r.mu.Unlock()
	if !ok || d.Size != len(wasm) {
		return Info{}, false, nil // a first upload is not hashed twice (the sandbox hashes it), nor bytes of another size
	}
	return r.Unchanged(ctx, name, sha256.Sum256(wasm))
}

// Unchanged returns name's running version when its bytes have the SHA-256
// sum and no later version is stored (by another host of a shared store,
// not yet deployed here); ok is false otherwise. An upload whose sum its
// reader took as it read answers from it, before anything else (Put does
// the same from the bytes).
func (r *Registry) Unchanged(ctx context.Context, name string, sum [sha256.Size]byte) (Info, bool, error) {
	r.mu.Lock()
	d, ok := r.mods[name]
	r.mu.Unlock()
	if !ok || d.SHA256 != hex.EncodeToString(sum[:]) {
		return Info{}, false, nil
	}
	last, err := r.store.LastVersion(ctx, name)
	if err != nil {
		return Info{}, false, fmt.Errorf("registry: store %s: %w", name, err)
	}
	if last != d.Version {
		return Info{}, false, nil
	}
	return d.info(), true, nil
}

func (r *Registry) put(ctx context.Context, name string, wasm []byte, rolledBackFrom int) (Info, bool, error) {
	if err := validName(name); err != nil {
		return Info{}, false, err
	}
	// The whole upload, not its Load alone: an earlier module's background
	// compile would start in the time this one is stored and subscribed,
	// and be cancelled by the next upload.
	defer r.opts.Sandbox.Foreground()()
	mod, err := r.opts.Sandbox.Load(ctx, name, wasm, r.opts.Settings().Module(name))
	if err != nil {
		return Info{}, false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	proc := mod.Description().Processor
	for other, d := range r.mods {
		if other != name && d.mod.Description().Processor == proc {
			mod.Close(ctx)
			return Info{}, false, fmt.Errorf("%w: module %s already serves processor %s", ErrConflict, other, proc)
		}
	}
	old := r.mods[name]
	d := &deployed{StoredModule: StoredModule{Name: name, SHA256: mod.SHA256(), Size: len(wasm), Uploaded: r.opts.Clock.Now().UTC(),
		RolledBackFrom: rolledBackFrom}, mod: mod}
	if err := r.storeVersion(ctx, &d.StoredModule, wasm); err != nil {
		mod.Close(ctx)
		return Info{}, false, fmt.Errorf("registry: store %s: %w", name, err)
	}
	if err := r.subscribe(ctx, d, old); err != nil {
		return Info{}, false, err
	}
	r.mods[name] = d
	if old != nil {
		old.mod.Close(ctx) // calls in flight on the old code finish first
	}
	logDeployed(r.opts.Logger, map[bool]string{true: "uploaded", false: "rolled back"}[rolledBackFrom == 0], d)
	return d.info(), old == nil, nil
}

// storeVersion numbers s after every version name has had, and stores it
// as the current one. On a store shared by several hosts another host's
// upload may take the number first (ErrVersionTaken): s takes the next one,
// up to maxVersionTries times.
func (r *Registry) storeVersion(ctx context.Context, s *StoredModule, wasm []byte) error {
	last, err := r.store.LastVersion(ctx, s.Name)
	if err != nil {
		return err
	}
	for range maxVersionTries {
		last++
		s.Version = last
		if err = r.store.Store(ctx, *s, wasm, r.keepVersions()); !errors.Is(err, ErrVersionTaken) {
			return err
		}
	}
	return err
}

// maxVersionTries bounds how many numbers an upload tries when other
// hosts' uploads of the same module keep taking them.
const maxVersionTries = 20

// keepVersions is store.module-versions as configured now (a reload applies
// from the next upload): how many versions of a module are kept, the current
// one included.
func (r *Registry) keepVersions() int {
	if n := r.opts.Settings().ModuleVersions(); n > 0 {
		return n
	}
	return DefaultKeepVersions
}

// subscribe points each handler's subscription at d's code: new ones are
// added, existing ones (a new version, a restart) are updated in place.
func (r *Registry) subscribe(ctx context.Context, d *deployed, old *deployed) error {
	existing := r.opts.Engine.Subscriptions()
	added := false
	defer func() {
		if added && r.opts.Added != nil {
			r.opts.Added()
		}
	}()
	for _, spec := range r.specs(d) {
		var err error
		if slices.Contains(existing, spec.Name) {
			err = r.opts.Engine.UpdateSpec(spec)
		} else {
			err = r.opts.Engine.Add(ctx, spec)
			added = added || err == nil
		}
		if err != nil {
			return fmt.Errorf("registry: subscription %s: %w", spec.Name, err)
		}
	}
	if old != nil {
		for _, name := range subscriptionNames(old.mod.Description()) {
			if !slices.Contains(subscriptionNames(d.mod.Description()), name) {
				r.opts.Logger.Warn("a handler was removed from the module; its subscription keeps its checkpoint and parked aggregates but gets no events until a module handles it again",
					"module", d.Name, "subscription", name)
				r.detach(name)
			}
		}
	}
	return nil
}

// detach leaves a subscription without code: every attempt fails as a
// systemic outage, so its events wait (nothing is parked or skipped) until a
// module serving it is deployed again.
func (r *Registry) detach(name string) {
	inv := subscription.InvokerFunc(func(context.Context, subscription.Delivery) *retry.Failure {
		return &retry.Failure{Reported: retry.ReportedSystemic, Classes: []string{retry.ClassNoModule},
			Message: "no deployed module handles subscription " + name}
	})
	if err := r.opts.Engine.UpdateSpec(subscription.Spec{Name: name, Invoker: inv}); err != nil {
		r.opts.Logger.Error("detach subscription", "subscription", name, "error", err)
	}
}

// specs builds the subscription specs of a module's handlers.
func (r *Registry) specs(d *deployed) []subscription.Spec {
	cfg := r.opts.Settings()
	desc := d.mod.Description()
	start := subscription.StartEnd
	if desc.Start == abi.StartBeginning || (desc.Start == abi.StartDefault && desc.Kind == abi.KindProjection) {
		start = subscription.StartBeginning
	}
	classes := classTree(desc)
	specs := make([]subscription.Spec, 0, len(desc.Handlers))
	for _, h := range desc.Handlers {
		if !subscribes(h) {
			continue
		}
		name := desc.Processor + "." + h.Name
		_, override := cfg.RetryLayers(name)
		specs = append(specs, subscription.Spec{
			Name:           name,
			Processor:      desc.Processor,
			Handler:        h.Name,
			EventTypes:     h.EventTypes,
			Start:          start,
			ProcessorRetry: settingsOf(desc.Retry),
			HandlerRetry:   settingsOf(h.Retry),
			OverrideRetry:  override,
			Classes:        classes,
			Parked:         cfg.Parked(name),
			Invoker:        r.invokerFor(d, desc, h),
			OnReset:        r.onReset(desc, name),
		})
	}
	return specs
}

// classTree is the error class tree a module declares, which its
// subscriptions classify failures by (validated at load: no unknown
// parents, no cycles).
func classTree(desc abi.Description) *retry.ClassTree {
	parents := make(map[string]string, len(desc.Classes))
	for _, c := range desc.Classes {
		parents[c.Name] = c.Parent
	}
	return retry.NewClassTree(parents)
}

func settingsOf(s abi.RetrySettings) retry.Settings {
	return retry.Settings{
		MaxAttempts:    int(s.MaxAttempts),
		InitialBackoff: s.InitialBackoff,
		MaxBackoff:     s.MaxBackoff,
		Timeout:        s.Timeout,
		Unrecoverable:  s.Unrecoverable,
		Recoverable:    s.Recoverable,
	}
}

func subscriptionNames(desc abi.Description) []string {
	var names []string
	for _, h := range desc.Handlers {
		if subscribes(h) {
			names = append(names, desc.Processor+"."+h.Name)
		}
	}
	return names
}

// subscribes reports whether a handler gets a subscription: every handler
// but a saga's rejection handler (registered only for the reserved
// berth.CommandRejected type), which the host calls itself.
func subscribes(h abi.HandlerDesc) bool {
	for _, t := range h.EventTypes {
		if t != abi.EventCommandRejected {
			return true
		}
	}
	return false
}

// Reconfigure applies a reloaded configuration: each module is loaded again
// under its (possibly changed) module settings, and every subscription's
// override and parked settings are refreshed. Retry changes apply from the
// next attempt.
func (r *Registry) Reconfigure(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for name, d := range r.mods {
		_, wasm, err := r.store.Load(ctx, name, d.Version)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		mod, err := r.opts.Sandbox.Load(ctx, name, wasm, r.opts.Settings().Module(name))
		if err != nil {
			errs = append(errs, fmt.Errorf("module %s: %w", name, err))
			continue
		}
		nd := &deployed{StoredModule: d.StoredModule, mod: mod}
		if err := r.subscribe(ctx, nd, d); err != nil {
			errs = append(errs, err)
			continue
		}
		r.mods[name] = nd
		d.mod.Close(ctx)
	}
	return errors.Join(errs...)
}

// Get describes one module.
func (r *Registry) Get(name string) (Info, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.mods[name]
	if !ok {
		return Info{}, false
	}
	return d.info(), true
}

// List describes every module, by name.
func (r *Registry) List() []Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Info, 0, len(r.mods))
	for _, d := range r.mods {
		out = append(out, d.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ModuleOf returns the module serving a subscription ("" if none).
func (r *Registry) ModuleOf(subscriptionName string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, d := range r.mods {
		if slices.Contains(subscriptionNames(d.mod.Description()), subscriptionName) {
			return name
		}
	}
	return ""
}

// Delete undeploys a module. Its subscriptions keep their checkpoints and
// parked aggregates, and their events wait, until a module serving them is
// deployed again. Its kept versions stay: Rollback deploys one again, and a
// new upload numbers after them.
func (r *Registry) Delete(ctx context.Context, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.mods[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownModule, name)
	}
	if err := r.store.Remove(ctx, name); err != nil {
		return fmt.Errorf("registry: remove %s: %w", name, err)
	}
	for _, sub := range subscriptionNames(d.mod.Description()) {
		r.detach(sub)
	}
	delete(r.mods, name)
	d.mod.Close(ctx)
	return nil
}

func (d *deployed) info() Info {
	desc := d.mod.Description()
	in := Info{Name: d.Name, Version: d.Version, RolledBackFrom: d.RolledBackFrom,
		SHA256: d.SHA256, Size: d.Size, Uploaded: d.Uploaded, Processor: desc.Processor,
		Kind: desc.Kind.String(), Start: desc.Start.String(), DeadlineGuard: d.mod.DeadlineGuard()}
	for _, h := range desc.Handlers {
		hi := HandlerInfo{Name: h.Name, EventTypes: h.EventTypes}
		if subscribes(h) {
			hi.Subscription = desc.Processor + "." + h.Name
			in.Subscriptions = append(in.Subscriptions, hi.Subscription)
		}
		in.Handlers = append(in.Handlers, hi)
	}
	return in
}

func validName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("%w %q: use 1 to 64 letters, digits, '-' or '_'", ErrInvalidName, name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("%w %q: character %q is not allowed (use letters, digits, '-' or '_')", ErrInvalidName, name, c)
		}
	}
	return nil
}
