package subscription

import (
	"context"
	"sync"
)

// gate is open or closed; wait blocks while it is closed.
type gate struct {
	mu   sync.Mutex
	open bool
	ch   chan struct{} // closed while the gate is open
	// blocked counts the goroutines in wait on the closed gate. Nothing in
	// the engine reads it: it lets the package's tests know a paused reader
	// has stopped where it would otherwise read, instead of sleeping.
	blocked int
}

func newGate() *gate {
	g := &gate{open: true, ch: make(chan struct{})}
	close(g.ch)
	return g
}

func (g *gate) set(open bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if open == g.open {
		return
	}
	g.open = open
	if open {
		close(g.ch)
	} else {
		g.ch = make(chan struct{})
	}
}

func (g *gate) isOpen() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

// opened returns a channel closed while the gate is open.
func (g *gate) opened() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ch
}

func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	ch, open := g.ch, g.open
	if !open {
		g.blocked++
	}
	g.mu.Unlock()
	if !open {
		defer func() {
			g.mu.Lock()
			g.blocked--
			g.mu.Unlock()
		}()
	}
	select {
	case <-ch:
		return ctx.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}
