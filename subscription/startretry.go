package subscription

import (
	"context"
	"time"
)

// A run starts by reading the log's head and the subscription's checkpoints
// and parks. On a NATS backend either may be away for a moment (a stream's
// leader being elected, a node restarting), and a run that failed to start
// would otherwise stay stopped for good while the host keeps its partitions
// claimed. So every start — the engine's first, Add's, and the restarts of
// Own, Unhold, Hold and Reset — that fails is tried again with backoff on
// the engine's clock until one works or the engine closes. Meanwhile Status
// says StateStarting with the last error, and StartFailures counts the
// failed tries.

// startState is the retry of a subscription's start; s.life held.
type startState struct {
	// retrying is set while a failed start is being tried again; gen numbers
	// the retry loops, so that one outlived by a newer start (a hold, a
	// start that worked) ends when it wakes.
	retrying bool
	gen      uint64
	lastErr  error
}

// startOrRetryLocked starts a run, bounded by Options.StartTimeout; when
// that fails, it keeps trying in the background and returns the error for
// the caller to tell (the subscription is starting, not stopped). s.life
// held.
func (s *subscription) startOrRetryLocked(ctx context.Context) error {
	tctx, cancel := context.WithTimeout(ctx, s.e.opts.StartTimeout)
	err := s.startLocked(tctx)
	cancel()
	if err == nil {
		s.endRetryLocked()
		return nil
	}
	s.startFailedLocked(err)
	if !s.starting.retrying {
		s.starting.retrying = true
		s.starting.gen++
		gen := s.starting.gen
		if !s.e.goBackground(func() { s.retryStart(gen) }) {
			s.starting.retrying = false // the engine is closing
		}
	}
	return err
}

// endRetryLocked ends a retry under way: a run started, or a hold stopped
// the subscription on purpose; s.life held.
func (s *subscription) endRetryLocked() {
	if s.starting.retrying {
		s.starting.retrying = false
		s.starting.gen++
	}
	s.starting.lastErr = nil
}

// startFailedLocked counts and tells a failed start; s.life held.
func (s *subscription) startFailedLocked(err error) {
	s.starting.lastErr = err
	n := s.startFailures.Add(1)
	s.e.logger.Warn("subscription not started; trying again", "subscription", s.name, "failures", n, "err", err)
}

// retryStart tries the start again, with backoff on the engine's clock,
// until a run starts, the retry gen is outlived, or the engine closes.
func (s *subscription) retryStart(gen uint64) {
	e := s.e
	backoff := e.opts.StartBackoff
	for {
		// Jitter spreads the tries of hosts that failed together.
		wait := backoff/2 + time.Duration(float64(backoff/2)*e.opts.Jitter())
		t := e.clock.NewTimer(wait)
		select {
		case <-t.C():
		case <-e.ctx.Done():
			t.Stop()
			return
		}
		s.life.Lock()
		if s.starting.gen != gen || !s.starting.retrying || e.ctx.Err() != nil {
			s.life.Unlock()
			return
		}
		if s.run != nil || len(s.holds) > 0 {
			s.endRetryLocked()
			s.life.Unlock()
			return
		}
		ctx, cancel := context.WithTimeout(e.ctx, e.opts.StartTimeout)
		err := s.startLocked(ctx)
		cancel()
		switch {
		case err == nil:
			s.endRetryLocked()
			e.logger.Info("subscription started after failed starts", "subscription", s.name, "failures", s.startFailures.Load())
			s.life.Unlock()
			return
		case e.ctx.Err() != nil:
			s.life.Unlock()
			return
		}
		s.startFailedLocked(err)
		s.life.Unlock()
		backoff = min(2*backoff, e.opts.StartBackoffMax)
	}
}

// goBackground runs f in a goroutine that Close waits for; false, and f not
// run, once the engine is closing. It takes only bgMu, so any lock may be
// held.
func (e *Engine) goBackground(f func()) bool {
	e.bgMu.Lock()
	defer e.bgMu.Unlock()
	if e.bgClosed {
		return false
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		f()
	}()
	return true
}

// closeBackground refuses every later goBackground, before Close waits for
// e.wg.
func (e *Engine) closeBackground() {
	e.bgMu.Lock()
	e.bgClosed = true
	e.bgMu.Unlock()
}
