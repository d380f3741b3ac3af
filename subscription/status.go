package subscription

import (
	"context"
	"fmt"
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
	// StateStarting: the subscription's start failed and is being tried
	// again (startretry.go); Status.StartError says why.
	StateStarting = "starting"
	// StateHolding: a partition whose run is reading its parked aggregates
	// from the ledger's index before it delivers anything (holdparked.go).
	StateHolding = "holding"
)

// Status is a snapshot of one subscription, as this host sees it.
type Status struct {
	Name string
	// State is StateRunning, StatePaused (by an operator), StateStarting (a
	// failed start being tried again) or StateStopped.
	State string
	// StartError is, while starting, the last failed try's error; empty
	// otherwise. StartFailures counts the failed tries of its starts since
	// the engine opened.
	StartError    string
	StartFailures uint64
	// PausedUntil is, while paused until a time (Engine.PauseUntil), when
	// it goes on by itself; zero otherwise.
	PausedUntil time.Time
	// Checkpoint is the in-memory checkpoint: every commit below it was
	// handled, passed over or held for a parked aggregate. It is the lowest
	// of the checkpoints of the partitions this host works on (every one on
	// a single host); with none, or stopped, the subscription's stored
	// checkpoint.
	Checkpoint uint64
	// DurableCheckpoint is the lowest of those partitions' checkpoints as
	// last written to the ledger; a restart delivers again from there.
	DurableCheckpoint uint64
	Head              uint64 // the log's last position
	// Lag is the commits at or after Checkpoint, Head + 1 - Checkpoint; 0
	// while this host runs the subscription and works on no partition.
	Lag uint64
	// Host is Options.Host (empty on a single host); PartitionCount is
	// Options.Partitions. Partitions lists the partitions this host owns,
	// in index order: every one on a single host.
	Host           string
	PartitionCount int
	Partitions     []PartitionStatus
	// Fencings counts the partitions this host lost to fencing since it
	// started: another host claimed them, and this one stopped at its next
	// write (fence.go).
	Fencings uint64
	Parked   map[ledger.State]int // parked aggregates by state
	// Unread says, during an outage of the event log or the ledger, what
	// could not be read within statusReadTimeout; Head, Lag, Parked and
	// (when stopped or starting) the checkpoints are then unknown and
	// zero. Everything else is this host's own and still shown: an
	// operator paged by an outage sees the state, the start error and the
	// partitions rather than an error.
	Unread         string
	Policy         retry.Policy         // the effective retry policy, with Sources
	ParkedSettings retry.ParkedSettings // the effective long-horizon retry settings
}

// PartitionStatus is a snapshot of one partition this host owns.
type PartitionStatus struct {
	Index int
	State string // StateRunning, StateHolding or StateSystemicPaused
	// Epoch is the epoch this host owns the partition at (0 on a single
	// host). Fenced says another host claimed it since: this one stopped
	// working on it and waits to be told what it owns (Engine.Own).
	Epoch  uint64
	Fenced bool
	// Checkpoint and DurableCheckpoint are the partition's own, in memory
	// and as last written.
	Checkpoint        uint64
	DurableCheckpoint uint64
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

// Status returns a snapshot of a subscription; it fails only for a
// subscription this engine does not have. What it cannot read from the
// event log or the ledger (an outage) it says in Status.Unread.
func (e *Engine) Status(ctx context.Context, name string) (Status, error) {
	s, err := e.sub(name)
	if err != nil {
		return Status{}, err
	}
	cur := s.cur.Load()
	st := Status{Name: s.name, State: StateRunning, Policy: cur.policy, ParkedSettings: cur.parked,
		Host: e.opts.Host, PartitionCount: e.opts.Partitions, Fencings: s.fencings.Load(),
		StartFailures: s.startFailures.Load()}
	if !s.gate.isOpen() {
		st.State = StatePaused
		st.PausedUntil = s.pausedUntil()
	}
	stored, err := e.readStatus(ctx, s.name, &st)
	if err != nil {
		st.Unread = err.Error()
	}
	st.Checkpoint, st.DurableCheckpoint = stored, stored
	live := false
	s.life.RLock()
	r := s.run
	switch {
	case r == nil && s.starting.retrying && e.ctx.Err() == nil:
		st.State = StateStarting
		if s.starting.lastErr != nil {
			st.StartError = s.starting.lastErr.Error()
		}
	case r == nil:
		st.State = StateStopped
	default:
		for _, p := range r.owned {
			ps := p.status()
			st.Partitions = append(st.Partitions, ps)
			if ps.Fenced {
				continue
			}
			if !live || ps.Checkpoint < st.Checkpoint {
				st.Checkpoint = ps.Checkpoint
			}
			if !live || ps.DurableCheckpoint < st.DurableCheckpoint {
				st.DurableCheckpoint = ps.DurableCheckpoint
			}
			live = true
		}
	}
	s.life.RUnlock()
	if st.Unread == "" && (live || r == nil) && st.Head+1 > st.Checkpoint {
		st.Lag = st.Head + 1 - st.Checkpoint
	}
	return st, nil
}

func (p *partition) status() PartitionStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := PartitionStatus{Index: p.idx, State: StateRunning, Epoch: p.epoch, Fenced: p.isFenced(),
		Checkpoint: p.tracker.lowWater(), DurableCheckpoint: p.tracker.durable(),
		Concurrency: p.limit, MaxConcurrency: p.max, Active: p.running, Waiting: len(p.ready)}
	if p.paused {
		ps.State = StateSystemicPaused
		ps.PausedSince, ps.PauseReason, ps.FailedProbes = p.pausedSince, p.pauseReason, p.probeFailures
		if p.probing {
			ps.NextProbe = p.nextProbe
		}
	}
	if !p.r.holdingDone() {
		ps.State = StateHolding
	}
	ps.Held = p.held
	return ps
}

// statusReadTimeout bounds Status's reads of the event log and the ledger:
// an outage makes a status say so (Status.Unread) at once rather than
// wait as long as the stores ask NATS again.
const statusReadTimeout = 2 * time.Second

// readStatus reads the log's head and name's parked counts into st, and
// returns name's stored checkpoint.
func (e *Engine) readStatus(ctx context.Context, name string, st *Status) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, statusReadTimeout)
	defer cancel()
	head, err := e.events.Head(ctx)
	if err != nil {
		return 0, fmt.Errorf("the event log's head: %w", err)
	}
	var stored uint64
	var parked map[ledger.State]int
	if err := e.store.View(ctx, func(tx ledger.Tx) error {
		var err error
		if parked, err = tx.CountParked(name); err != nil {
			return err
		}
		stored, _, err = tx.Checkpoint(name)
		return err
	}); err != nil {
		return 0, fmt.Errorf("the ledger: %w", err)
	}
	st.Head, st.Parked = head, parked
	return stored, nil
}
