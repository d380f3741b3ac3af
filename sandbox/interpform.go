package sandbox

import (
	"context"
	"fmt"
	goruntime "runtime"
)

// A module waiting on the interpreter for its background compile holds the
// interpreter's form of its code: ~70 MiB of Go heap for a Go guest. The
// background compiles wait for the uploads to end (foreground.go), so an
// operator's six uploads one after another left six forms alive, and each
// upload grew the heap into memory the process had not touched, at ~20 µs
// a page on a VM: later uploads took 2-4x the first (issue 32). So an
// upload that makes a form first lets go the forms of the modules that
// wait, idle, for their compiles; the heap it needs is then memory the
// collector freed. Such a module compiles its form again if a call comes
// before its compile ends (reform); its compile, when its turn comes,
// moves it onto the compiled code as it would have.

// letFormsGo lets go the interpreter forms of the modules that wait, with
// no call in flight, for their background compiles (letFormGo), and
// collects them at once: the pacer's next collection would come only once
// the heap grew to twice what it was with them, into new memory.
func (s *Sandbox) letFormsGo() {
	let := false
	s.modules.Range(func(k, _ any) bool {
		let = k.(*Module).letFormGo() || let
		return true
	})
	if let {
		goruntime.GC()
	}
}

// letFormGo moves a module on the interpreter with no call in flight onto
// a cold interpreter tier (true): its idle instances are closed, and the
// form goes with its last reference. A module with a call in flight keeps
// its form: the call would close its instance on its return, and the next
// call compile the form again.
func (m *Module) letFormGo() bool {
	if !m.tierMu.TryLock() {
		return false // a call compiles its form again (reform): it is wanted
	}
	t := m.tier.Load()
	if t.interp == nil || m.closed.Load() || m.live.Load() > int64(m.pool.idleCount()) {
		m.tierMu.Unlock()
		return false
	}
	m.tier.Store(&tier{name: TierInterpreter, rt: t.rt, cold: true})
	m.tierMu.Unlock()
	m.pool.drop(m.stale, &m.pool.counts.idle)
	t.interp.release()
	return true
}

// reform compiles the interpreter's form again for a call that found the
// module's tier cold (t), and makes it the module's tier; nothing when the
// tier changed meanwhile (another call's reform, or the switch to the
// compiled code).
func (m *Module) reform(ctx context.Context, t *tier) error {
	m.tierMu.Lock()
	defer m.tierMu.Unlock()
	if m.tier.Load() != t {
		return nil
	}
	if m.closed.Load() {
		return ErrClosed
	}
	warm, err := m.s.interpreterTier(ctx, t.rt.key, m.code)
	if err != nil {
		return fmt.Errorf("the interpreter's form again: %w", err)
	}
	if m.closed.Load() { // Close released the tier it saw, not this one
		warm.interp.release()
		return ErrClosed
	}
	m.tier.Store(warm)
	return nil
}
