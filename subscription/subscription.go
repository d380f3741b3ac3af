package subscription

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/ledger"
)

// subscription is one handler's subscription; its run is the in-memory
// delivery state, replaced on Reset.
type subscription struct {
	e    *Engine
	name string
	// cur is read without a lock by every attempt; it is written only with
	// Engine.mu held (add, UpdateSpec, SetHostDefaults), so that a spec and
	// the host's layer are never resolved from two reloads' halves.
	cur atomic.Pointer[resolved]

	life sync.RWMutex // write-held while the run is replaced
	run  *run         // nil when not started
	// owned are the partitions this host owns, with their epochs (Engine.Own);
	// unused on a single host, which owns every one. s.life held.
	owned map[int]uint64
	// holds are the resets under way across hosts that keep the run
	// stopped (hold.go); s.life held.
	holds map[string]struct{}
	cpMu  sync.Mutex // serializes flushes (run.flush) and run.subDurable
	gate  *gate      // closed while the subscription is paused
	keys  *keyLocks  // serializes ledger changes per aggregate
	// pause is the end of a pause until a time, and its timer.
	pause    pauseState
	fencings atomic.Uint64 // partitions this host lost to fencing (fence.go)
	// starting is the retry of a start that failed (startretry.go); s.life
	// held. startFailures counts the failed tries since the engine opened.
	starting      startState
	startFailures atomic.Uint64
}

// start loads the durable state and starts a run, or keeps trying in the
// background when that fails (startretry.go); the error is the first
// try's.
func (s *subscription) start(ctx context.Context) error {
	s.life.Lock()
	defer s.life.Unlock()
	return s.startOrRetryLocked(ctx)
}

// ownedLocked returns the partitions the host owns, with their epochs:
// every partition at epoch 0 on a single host; s.life held.
func (s *subscription) ownedLocked() map[int]uint64 {
	if s.e.opts.Host != "" {
		return s.owned
	}
	all := make(map[int]uint64, s.e.opts.Partitions)
	for i := range s.e.opts.Partitions {
		all[i] = 0
	}
	return all
}

// startLocked starts a run over the partitions the host owns, each from its
// own checkpoint, with their parked aggregates; s.life held.
func (s *subscription) startLocked(ctx context.Context) error {
	e := s.e
	var (
		sp     startPoints
		paused bool
		until  time.Time
	)
	head, err := e.events.Head(ctx)
	if err != nil {
		return fmt.Errorf("subscription %q: %w", s.name, err)
	}
	owned := s.ownedLocked()
	err = e.store.Update(ctx, func(tx ledger.Tx) error {
		// Everything is set afresh: the closure may run more than once.
		paused = false
		var err error
		if sp, err = s.loadStartPoints(tx, head, owned); err != nil {
			return err
		}
		v, err := tx.Meta(s.name, metaPaused)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
		case err != nil:
			return err
		default:
			paused, until = parsePause(v)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("subscription %q: %w", s.name, err)
	}
	if sp.repartitioned != 0 {
		e.logger.Warn("subscription.partitions changed: every partition starts from the lowest stored partition checkpoint; events after it are delivered again",
			"subscription", s.name, "from", sp.repartitioned, "to", e.opts.Partitions, "position", sp.sub)
	}
	s.applyPause(paused, until)
	r := newRun(s, sp.parts, sp.sub)
	r.fresh = head + 1
	// The parked aggregates are held, and the reader started, in the
	// background (begin): a start with many parked does not wait for them.
	r.wg.Add(1)
	go r.begin()
	s.run = r
	e.obs.started(s.name)
	return nil
}

// stop ends the run, waiting for its goroutines; with flush it writes the
// checkpoint.
func (s *subscription) stop(ctx context.Context, flush bool) error {
	s.life.Lock()
	defer s.life.Unlock()
	return s.stopLocked(ctx, flush)
}

func (s *subscription) stopLocked(ctx context.Context, flush bool) error {
	r := s.run
	if r == nil {
		return nil
	}
	s.run = nil
	r.cancel()
	r.wg.Wait()
	if flush {
		if err := r.flush(ctx); err != nil {
			return fmt.Errorf("subscription %q: final checkpoint: %w", s.name, err)
		}
	}
	return nil
}

// current returns the running run and a release func, or an error if the
// subscription is not running; the run cannot be replaced before release.
func (s *subscription) current() (*run, func(), error) {
	s.life.RLock()
	if s.run == nil {
		s.life.RUnlock()
		return nil, nil, fmt.Errorf("subscription %q: not running: %w", s.name, ErrClosed)
	}
	return s.run, s.life.RUnlock, nil
}

const metaPaused = "paused"
