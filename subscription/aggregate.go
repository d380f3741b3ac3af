package subscription

import (
	"errors"
	"log/slog"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/ledger"
)

// mode is where an aggregate stands in a partition.
type mode int

const (
	// modeLive: its commits are delivered as the reader hands them over.
	modeLive mode = iota
	// modeHeld: parked; its commits are passed over (and the checkpoint moves
	// past them) because a resume reads them again from its stream.
	modeHeld
	// modeReplaying: resuming; a replay reads its stream while live commits
	// queue up, to be sorted into handled-by-replay and new at the end.
	modeReplaying
)

// aggState is the in-memory state of one aggregate in a partition. Only
// aggregates with queued work, a hold, or a floor have one.
type aggState struct {
	key     aggKey
	mode    mode
	queue   []eventlog.Commit // live commits waiting, in version order
	running bool              // a worker holds a slot for it
	queued  bool              // in the partition's ready list
	// floor: live commits of versions up to floor are not delivered; they
	// were handled by a replay or skipped by an operator while the reader was
	// behind. Cleared by the first live commit above it.
	floor uint64
	// pinned is the invocation key of the event a replay starts at, as its
	// ledger record keeps it (invocationkey.go). Set before the replay starts.
	pinned pinnedKey
	// park names the park that made it held (run.parks numbers them), so
	// that the host takes back only the park it meant to (outage_park.go).
	park uint64
}

// outcome is how a delivery ended.
type outcome int

const (
	outcomeHandled   outcome = iota
	outcomeParked            // the aggregate was parked at this event
	outcomeCancelled         // the run is stopping; nothing was recorded
)

// handleCommit delivers the events of c from index from on that the handler
// wants, in order. live says c came from the reader (its position is tracked
// for the checkpoint) rather than from a replay.
func (r *run) handleCommit(p *partition, a *aggState, c eventlog.Commit, from int, live bool) outcome {
	for i := from; i < len(c.Events); i++ {
		if !r.s.cur.Load().wants(c.Events[i].Type) {
			continue
		}
		if o := r.deliver(p, a, c, i, live); o != outcomeHandled {
			return o
		}
	}
	return outcomeHandled
}

// beginReplay turns a held aggregate into a resuming one and starts reading
// its stream from (version, index). The caller holds the aggregate's key
// lock and has committed the ledger's resuming state in p, the aggregate's
// partition; key is the record's key of the event at (version, index).
func (r *run) beginReplay(p *partition, k aggKey, version uint64, index int, key string) {
	p.mu.Lock()
	a := p.agg(k)
	p.setMode(a, modeReplaying)
	a.pinned = pinnedKey{version, index, key}
	p.mu.Unlock()
	r.wg.Add(1)
	go r.replay(p, a, version, index)
}

// replay delivers an aggregate's stream from (version, index) to its end,
// then rejoins live delivery. Commits the reader hands over meanwhile are
// queued; at the end those the replay already handled are dropped and the
// rest delivered live, so nothing is missed or handled twice: a commit the
// replay's last read did not see is either queued already or not yet read.
func (r *run) replay(p *partition, a *aggState, version uint64, index int) {
	defer r.wg.Done()
	const page = 100
	last := version - 1 // the last version handled; versions below the start count as done
	for {
		commits, err := r.e.events.ReadAggregate(p.ctx, a.key.typ, a.key.id, version, page)
		if err != nil {
			if p.ctx.Err() != nil {
				return
			}
			r.e.logger.Error("replay: reading the aggregate's stream failed", "subscription", r.s.name,
				"aggregate", a.key.String(), "version", version, "err", err)
			if sleepReal(p.ctx) != nil {
				return
			}
			continue
		}
		for _, c := range commits {
			from := 0
			if c.Version == version {
				from = index
			}
			switch r.handleCommit(p, a, c, from, false) {
			case outcomeParked:
				return
			case outcomeCancelled:
				return
			}
			last = c.Version
			version, index = c.Version+1, 0
		}
		if len(commits) < page {
			break
		}
	}
	r.endReplay(p, a, last)
}

// endReplay deletes the ledger record and rejoins live delivery.
func (r *run) endReplay(p *partition, a *aggState, last uint64) {
	unlock := r.s.keys.lock(a.key)
	defer unlock()
	for tries := 0; ; tries++ {
		err := r.withCheckpoint(p.ctx, p, 0, func(tx ledger.Tx) error {
			err := tx.DeleteParked(r.s.name, a.key.typ, a.key.id)
			if errors.Is(err, ledger.ErrNotFound) {
				return nil
			}
			return err
		})
		if err == nil {
			break
		}
		if p.ctx.Err() != nil {
			return // stopped, or fenced: the record stays resuming for the next run
		}
		if tries%60 == 0 { // said once a minute, not every second (a full disk, say)
			r.e.logger.Error("replay: clearing the ledger record failed; trying again every second", "subscription", r.s.name, "aggregate", a.key.String(), "err", err)
		}
		if sleepReal(p.ctx) != nil {
			return
		}
	}
	r.e.storm.Log(slog.LevelInfo, "aggregate rejoined live delivery", "subscription", r.s.name, "aggregate", a.key.String(), "version", last)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setMode(a, modeLive)
	a.floor = last
	keep := a.queue[:0]
	for _, c := range a.queue {
		if c.Version <= last {
			p.finished(c.Position)
			continue
		}
		keep = append(keep, c)
	}
	a.queue = keep
	if len(keep) > 0 {
		a.floor = 0
	}
	p.schedule(a)
	p.forget(a)
}
