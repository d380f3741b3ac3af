package sandbox

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

// callState is what host functions need to know about the call they serve.
// It travels in the context wazero hands to host functions.
type callState struct {
	mod   *Module
	ev    *abi.Event
	ports Ports

	// expired is set when the call's deadline passes (or its caller gives
	// up); host functions and the loop guard end the call when they see it.
	expired atomic.Bool
	done    chan struct{} // closed by expire
	firedAt atomic.Int64  // when expire ran, unix nanoseconds
	once    sync.Once

	reply    []byte // the pending reply of the last host call
	observed Observed
	commands []abi.Command
}

type callKey struct{}

func withCall(ctx context.Context, cs *callState) context.Context {
	return context.WithValue(ctx, callKey{}, cs)
}

// callFrom returns the call a host function serves, nil outside a call
// (e.g. while the instance runs _initialize).
func callFrom(ctx context.Context) *callState {
	cs, _ := ctx.Value(callKey{}).(*callState)
	return cs
}

func newCallState(mod *Module, ev *abi.Event) *callState {
	return &callState{mod: mod, ev: ev, done: make(chan struct{})}
}

// expire marks the call as past its deadline and wakes sleeping guests.
func (cs *callState) expire() {
	cs.once.Do(func() {
		cs.firedAt.Store(time.Now().UnixNano())
		cs.expired.Store(true)
		close(cs.done)
	})
}

// checkExpired ends the call if its deadline passed.
func (cs *callState) checkExpired(ctx context.Context) {
	if cs.expired.Load() {
		panic(errDeadline)
	}
	if ctx.Err() != nil {
		cs.expire()
		panic(errDeadline)
	}
}

// sleep is the guest's nanosleep (WASI poll_oneoff with a clock): it returns
// after d, or ends the call when the deadline comes first.
func (cs *callState) sleep(d time.Duration) {
	if cs.expired.Load() {
		panic(errDeadline)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-cs.done:
		panic(errDeadline)
	}
}
