package sandbox

import (
	"context"
	"sync"
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

// Replays replays many capsules on a module (a failure group's, against
// a candidate fix), reusing instances from one replay to the next as live
// delivery reuses its pooled instances: a new instance costs a Go guest
// some milliseconds (instantiation, its runtime's _initialize, its memory
// growing to its working size), its call a tenth of one.
//
// What a reused instance keeps is what a live pooled instance keeps from
// one event to the next: the guest's own globals and heap. Everything the
// host gives a call is bound to each replay, not to the instance: its
// event, the recorded host-call answers (matched from the first recorded
// call), clock readings, random bytes, deadline and departures. A replay
// on a reused instance differs from one on a fresh instance in three ways
// only: _initialize ran once, for the replay the instance was made for;
// the guest's globals are as the earlier replays left them; and the
// monotonic clock's readings are moved as one past the instance's last
// (their differences are the recorded ones), so that the guest's clock
// never runs backwards. An instance goes on to the next replay only when
// live delivery's pool would keep it: after a success or a failure the
// guest returned, with its memory below the recycling thresholds
// (Config.RecycleMemoryFraction, Config.RecycleGrowth); after a timeout,
// a trap or memory exceeded it is closed.
//
// Replays is safe for concurrent use; it keeps at most size instances
// idle (a replay past that makes one of its own, closed after).
type Replays struct {
	m    *Module
	size int

	mu     sync.Mutex
	idle   []*instance
	closed bool
	made   int // instances made, for tests and figures
}

// Replays returns a set of instances of m for replays, keeping at most
// size of them (1 or more) between replays. Close it when done, before m.
func (m *Module) Replays(size int) *Replays {
	return &Replays{m: m, size: max(size, 1)}
}

// Replay is Module.Replay, on an instance kept from an earlier replay
// when one is idle.
func (rs *Replays) Replay(ctx context.Context, c *abi.Capsule) (Replayed, error) {
	return rs.m.replay(ctx, c, rs)
}

// Made returns how many instances rs has made so far.
func (rs *Replays) Made() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.made
}

// Close closes the idle instances; later replays run on fresh instances,
// closed after them.
func (rs *Replays) Close() {
	rs.mu.Lock()
	idle := rs.idle
	rs.idle, rs.closed = nil, true
	rs.mu.Unlock()
	for _, inst := range idle {
		inst.close()
	}
}

// take returns an instance for the replay rp answers: an idle one, bound
// to rp, or a new one made under rp.
func (rs *Replays) take(ctx context.Context, rp *replayer) (*instance, error) {
	var inst *instance
	rs.mu.Lock()
	for inst == nil && len(rs.idle) > 0 {
		n := len(rs.idle) - 1
		inst, rs.idle[n], rs.idle = rs.idle[n], nil, rs.idle[:n]
		if rs.m.pool.stale(inst) { // made on a tier the module has left
			rs.mu.Unlock()
			inst.close()
			inst = nil
			rs.mu.Lock()
		}
	}
	if inst == nil {
		rs.made++
	}
	rs.mu.Unlock()
	if inst == nil {
		return rs.m.makeInstance(ctx, time.Time{}, rp)
	}
	rp.after(inst.cs.replayNano)
	inst.cs.replay = rp
	return inst, nil
}

// give ends an instance's replay, which ended as kind: rs keeps it for
// the next when live delivery's pool would (pool.put), else it is closed.
func (rs *Replays) give(inst *instance, kind OutcomeKind) {
	keep := kind == Success || kind == GuestFailure
	if keep {
		mem := inst.memoryBytes()
		rs.m.sawMemory(inst, mem)
		keep = rs.m.pool.reusable(inst, mem) && !rs.m.pool.stale(inst)
	}
	inst.cs.replay = nil // nothing of this replay's recording stays reachable
	rs.mu.Lock()
	if keep && !rs.closed && len(rs.idle) < rs.size {
		rs.idle = append(rs.idle, inst)
		rs.mu.Unlock()
		return
	}
	rs.mu.Unlock()
	inst.close()
}
