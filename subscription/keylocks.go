package subscription

import (
	"context"
	"sync"
)

// keyLocks are per-aggregate mutexes, so that a park, a parked retry and an
// operator's resume or skip of one aggregate never interleave, while those
// of different aggregates do not wait on each other.
type keyLocks struct {
	mu sync.Mutex
	m  map[aggKey]*keyLock
}

type keyLock struct {
	ch   chan struct{} // holds a token while locked
	refs int
}

func newKeyLocks() *keyLocks { return &keyLocks{m: map[aggKey]*keyLock{}} }

func (k *keyLocks) lock(key aggKey) func() {
	unlock, _ := k.lockCtx(context.Background(), key)
	return unlock
}

// lockCtx is lock that gives up when ctx ends (an operator's request that
// should not wait for a running parked retry).
func (k *keyLocks) lockCtx(ctx context.Context, key aggKey) (func(), error) {
	k.mu.Lock()
	l := k.m[key]
	if l == nil {
		l = &keyLock{ch: make(chan struct{}, 1)}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()
	release := func() {
		k.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
	return func() {
		<-l.ch
		release()
	}, nil
}
