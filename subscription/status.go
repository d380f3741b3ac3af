package subscription

import (
	"context"
	"time"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// Subscription and partition states reported by Status.
const (
	StateRunning        = "running"
	StatePaused         = "paused"
	StateStopped        = "stopped"
	StateSystemicPaused = "systemic-paused"
)

// Status is a snapshot of one subscription.
type Status struct {
	Name  string
	State string // StateRunning, StatePaused (by an operator) or StateStopped
	// PausedUntil is, while paused until a time (Engine.PauseUntil), when
	// it goes on by itself; zero otherwise.
	PausedUntil time.Time
	// Checkpoint is the in-memory checkpoint: every commit below it was
	// handled, passed over or held for a parked aggregate.
	Checkpoint uint64
	// DurableCheckpoint is the checkpoint last written to the ledger; a
	// restart delivers again from there.
	DurableCheckpoint uint64
	Head              uint64 // the log's last position
	Lag               uint64 // commits at or after Checkpoint: Head + 1 - Checkpoint
	Partitions        []PartitionStatus
	Parked            map[ledger.State]int // parked aggregates by state
	Policy            retry.Policy         // the effective retry policy, with Sources
	ParkedSettings    retry.ParkedSettings // the effective long-horizon retry settings
}

// PartitionStatus is a snapshot of one partition.
type PartitionStatus struct {
	Index int
	State string // StateRunning or StateSystemicPaused
	// PausedSince, PauseReason, NextProbe and FailedProbes describe a
	// systemic pause; NextProbe is when the probe under way was due (zero
	// before the first waiter takes the probe).
	PausedSince    time.Time
	PauseReason    string
	NextProbe      time.Time
	FailedProbes   int
	Concurrency    int // current limit, lowered by backpressure
	MaxConcurrency int // configured limit
	Active         int // aggregates being handled now
	Waiting        int // aggregates with events waiting for a slot
	Held           int // parked aggregates held in memory
}

// Status returns a snapshot of a subscription.
func (e *Engine) Status(ctx context.Context, name string) (Status, error) {
	s, err := e.sub(name)
	if err != nil {
		return Status{}, err
	}
	cur := s.cur.Load()
	st := Status{Name: s.name, State: StateRunning, Policy: cur.policy, ParkedSettings: cur.parked}
	if !s.gate.isOpen() {
		st.State = StatePaused
		st.PausedUntil = s.pausedUntil()
	}
	if st.Head, err = e.events.Head(ctx); err != nil {
		return Status{}, err
	}
	if err := e.store.View(ctx, func(tx ledger.Tx) error {
		var err error
		if st.Parked, err = tx.CountParked(s.name); err != nil {
			return err
		}
		st.DurableCheckpoint, _, err = tx.Checkpoint(s.name)
		return err
	}); err != nil {
		return Status{}, err
	}
	s.life.RLock()
	r := s.run
	if r == nil {
		st.State = StateStopped
		st.Checkpoint = st.DurableCheckpoint
	} else {
		st.Checkpoint = r.tracker.lowWater()
		for _, p := range r.parts {
			st.Partitions = append(st.Partitions, p.status())
		}
	}
	s.life.RUnlock()
	if st.Head+1 > st.Checkpoint {
		st.Lag = st.Head + 1 - st.Checkpoint
	}
	return st, nil
}

func (p *partition) status() PartitionStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := PartitionStatus{Index: p.idx, State: StateRunning, Concurrency: p.limit, MaxConcurrency: p.max,
		Active: p.running, Waiting: len(p.ready)}
	if p.paused {
		ps.State = StateSystemicPaused
		ps.PausedSince, ps.PauseReason, ps.FailedProbes = p.pausedSince, p.pauseReason, p.probeFailures
		if p.probing {
			ps.NextProbe = p.nextProbe
		}
	}
	for _, a := range p.aggs {
		if a.mode == modeHeld {
			ps.Held++
		}
	}
	return ps
}
