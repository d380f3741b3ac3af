package sandbox

import (
	"context"
	"sync"
	"time"
)

// pool holds a module's instances. An instance serves one call at a time
// (wazero instances must never be entered by two goroutines at once); the
// pool grows with demand up to its cap and shrinks as instances sit idle.
type pool struct {
	sem chan struct{} // one token per instance in use or being created

	mu     sync.Mutex
	idle   []*instance // most recently used last
	closed bool
}

func newPool(size int) *pool { return &pool{sem: make(chan struct{}, size)} }

// acquire returns an idle instance or one made by create, waiting for a free
// slot when the pool is at its cap.
func (p *pool) acquire(ctx context.Context, create func(context.Context) (*instance, error)) (*instance, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.sem
		return nil, ErrClosed
	}
	if n := len(p.idle); n > 0 {
		inst := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return inst, nil
	}
	p.mu.Unlock()
	inst, err := create(ctx)
	if err != nil {
		<-p.sem
		return nil, err
	}
	return inst, nil
}

// put returns an instance after a call. A broken instance (trapped, timed
// out, out of memory) is closed, never reused.
func (p *pool) put(inst *instance, broken bool) {
	p.mu.Lock()
	if broken || p.closed {
		p.mu.Unlock()
		inst.close()
	} else {
		inst.lastUsed = time.Now()
		p.idle = append(p.idle, inst)
		p.mu.Unlock()
	}
	<-p.sem
}

// add puts a fresh instance into the idle list without a call (the probe
// instance made at load), if there is room.
func (p *pool) add(inst *instance) {
	p.mu.Lock()
	if p.closed || len(p.idle) >= cap(p.sem) {
		p.mu.Unlock()
		inst.close()
		return
	}
	inst.lastUsed = time.Now()
	p.idle = append(p.idle, inst)
	p.mu.Unlock()
}

// releaseIdle closes the instances last used before the cutoff.
func (p *pool) releaseIdle(_ context.Context, cutoff time.Time) {
	p.mu.Lock()
	var stale []*instance
	keep := p.idle[:0]
	for _, inst := range p.idle {
		if inst.lastUsed.Before(cutoff) {
			stale = append(stale, inst)
		} else {
			keep = append(keep, inst)
		}
	}
	clear(p.idle[len(keep):])
	p.idle = keep
	p.mu.Unlock()
	for _, inst := range stale {
		inst.close()
	}
}

// idleCount returns how many instances are idle.
func (p *pool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// close closes the idle instances; instances in use close when put back.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, inst := range idle {
		inst.close()
	}
}
