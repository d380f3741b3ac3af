package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/jsapi"
)

// Watch keeps this host's deployed modules in step with a store shared by
// several hosts (a Watcher): each module another host stores, rolls back or
// removes is deployed or undeployed here too, until ctx is done. With a
// store that is not a Watcher (the file store), it returns at once.
//
// A change is met three ways, all through resync or Sync: the watch tells
// it; once the watch begins, what changed before it (an upload on another
// host while this one opened, or while a failed watch was started again);
// and every resyncEvery, in case the watch went quiet without failing (a
// consumer on a server that stopped delivering). Watch returns once the
// periodic resync has stopped too.
func (r *Registry) Watch(ctx context.Context) error {
	w, ok := r.store.(Watcher)
	if !ok {
		return nil
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	defer func() {
		close(stop)
		<-stopped // a resync under way ends before Watch returns
	}()
	clk := r.opts.Clock
	go func() {
		defer close(stopped)
		for {
			t := clk.NewTimer(resyncEvery)
			select {
			case <-stop:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
				r.resync(ctx, w)
			}
		}
	}()
	return w.Watch(ctx, func() { r.resync(ctx, w) }, func(name string) {
		if err := r.Sync(ctx, name); err != nil && ctx.Err() == nil {
			r.opts.Logger.Error("module changed on another host; deploying it here failed", "module", name, "error", err)
		}
	})
}

// resyncEvery is how often a watching registry compares the shared
// store's current versions with what runs here.
const resyncEvery = 10 * time.Second

// resync syncs each module whose current version in w differs from the
// one running here, and each running here that w has no more: a look at
// the versions only, the bytes read for what differs.
func (r *Registry) resync(ctx context.Context, w Watcher) {
	metas, err := w.CurrentVersions(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.opts.Logger.Warn("reading the shared modules' current versions failed; looking again later", "error", err)
		}
		return
	}
	current := make(map[string]StoredModule, len(metas))
	for _, m := range metas {
		current[m.Name] = m
	}
	var differ []string
	r.mu.Lock()
	for name, d := range r.mods {
		if m, ok := current[name]; !ok || m.Version != d.Version || m.SHA256 != d.SHA256 {
			differ = append(differ, name)
		}
	}
	for name := range current {
		if _, ok := r.mods[name]; !ok {
			differ = append(differ, name)
		}
	}
	r.mu.Unlock()
	// Each is read again by Sync: one uploaded here since the look above is
	// not in it, and must stay.
	for _, name := range differ {
		if err := r.Sync(ctx, name); err != nil && ctx.Err() == nil {
			r.opts.Logger.Error("a module another host changed; deploying it here failed", "module", name, "error", err)
		}
	}
}

// Sync deploys here the shared store's current version of module name, or
// undeploys it if the store has none: what another host stored reaches this
// one. A version already deployed here is left as it is. Only that
// version's bytes are read. With a store that is not a Watcher, it does
// nothing.
func (r *Registry) Sync(ctx context.Context, name string) error {
	w, ok := r.store.(Watcher)
	if !ok {
		return nil
	}
	m, ok, err := w.CurrentVersion(ctx, name)
	if err != nil {
		return fmt.Errorf("registry: sync %s: %w", name, err)
	}
	if !ok {
		r.undeployGone(ctx, name)
		return nil
	}
	// The version is stored: the current record names it. A server behind
	// the one that answered may not show it yet (hosts starting together),
	// so "no such version" is asked again, a few times (about 3.5 s).
	unknown := func(err error) bool { return errors.Is(err, ErrUnknownVersion) }
	wasm, err := jsapi.Retry(ctx, jsapi.Policy{Attempts: 8}, unknown, func(ctx context.Context) ([]byte, error) {
		_, wasm, err := r.store.Load(ctx, name, m.Version)
		return wasm, err
	})
	if err != nil {
		return fmt.Errorf("registry: sync %s: %w", name, err)
	}
	return r.deployStored(ctx, m, wasm)
}

// undeployGone undeploys module name, which the shared store has no more.
func (r *Registry) undeployGone(ctx context.Context, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.mods[name]
	if !ok {
		return
	}
	for _, sub := range subscriptionNames(d.mod.Description()) {
		r.detach(sub)
	}
	delete(r.mods, name)
	d.mod.Close(ctx)
	r.opts.Logger.Info("module removed on another host; undeployed here", "module", name)
}

// deployStored deploys a version the store already holds, unless it runs
// here already — also one older than the one running here (see below).
func (r *Registry) deployStored(ctx context.Context, m StoredModule, wasm []byte) error {
	r.mu.Lock()
	if d, ok := r.mods[m.Name]; ok && d.Version == m.Version && d.SHA256 == m.SHA256 {
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	mod, err := r.opts.Sandbox.Load(ctx, m.Name, wasm, r.opts.Settings().Module(m.Name))
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.mods[m.Name]
	if old != nil && old.Version == m.Version && old.SHA256 == m.SHA256 {
		mod.Close(ctx) // deployed meanwhile
		return nil
	}
	// An older version than the one running here is deployed too: the
	// store's current one is what every host runs, and two hosts' uploads
	// whose writes crossed leave the one stored last current, whatever its
	// number. A Sync that read a state since overtaken is corrected by the
	// next change's Sync: every write of a current version is watched.
	d := &deployed{StoredModule: m, mod: mod}
	if err := r.subscribe(ctx, d, old); err != nil {
		mod.Close(ctx)
		return err
	}
	r.mods[m.Name] = d
	if old != nil {
		old.mod.Close(ctx)
	}
	r.opts.Logger.Info("module stored on another host; deployed here", "module", m.Name, "version", m.Version)
	return nil
}
