package subscription

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/berthhq/berth/ledger"
)

// pauseState is a subscription's operator pause beyond its gate: when a
// pause has an end ("pause until"), the time and the timer that unpauses it.
type pauseState struct {
	mu    sync.Mutex
	until time.Time // zero: not paused, or paused until an operator unpauses
	timer Timer
}

// pauseValue is how a pause is kept in the ledger's meta: "true", "false" or
// "until:<RFC 3339 time>".
func pauseValue(paused bool, until time.Time) []byte {
	switch {
	case !paused:
		return []byte("false")
	case until.IsZero():
		return []byte("true")
	}
	return []byte("until:" + until.UTC().Format(time.RFC3339Nano))
}

// parsePause reads pauseValue's form (an unreadable time pauses without an
// end: an operator unpauses it, rather than the host guessing).
func parsePause(v []byte) (paused bool, until time.Time) {
	s := string(v)
	if t, ok := strings.CutPrefix(s, "until:"); ok {
		u, err := time.Parse(time.RFC3339Nano, t)
		if err != nil {
			return true, time.Time{}
		}
		return true, u
	}
	return s == "true", time.Time{}
}

// applyPause opens or closes the gate and, for a pause with an end still to
// come, schedules the unpause on the engine's clock; an end already past
// opens it at once. It reports whether the subscription is paused now.
func (s *subscription) applyPause(paused bool, until time.Time) bool {
	s.pause.mu.Lock()
	defer s.pause.mu.Unlock()
	if s.pause.timer != nil {
		s.pause.timer.Stop()
		s.pause.timer = nil
	}
	s.pause.until = time.Time{}
	if paused && !until.IsZero() {
		d := until.Sub(s.e.clock.Now())
		if d <= 0 {
			paused = false
		} else {
			s.pause.until = until
			s.pause.timer = s.e.clock.AfterFunc(d, func() { s.endPause(until) })
		}
	}
	s.gate.set(!paused)
	return paused
}

// pausedUntil is the end of a timed pause (zero if none).
func (s *subscription) pausedUntil() time.Time {
	s.pause.mu.Lock()
	defer s.pause.mu.Unlock()
	return s.pause.until
}

// endPause unpauses the subscription when its pause until ends, unless it
// was paused or unpaused again meanwhile. A ledger that refuses the write
// (a full disk) is tried again each second; the gate stays closed till then.
func (s *subscription) endPause(until time.Time) {
	if !s.pausedUntil().Equal(until) {
		return
	}
	err := s.e.store.Update(context.Background(), func(tx ledger.Tx) error {
		return tx.SetMeta(s.name, metaPaused, pauseValue(false, time.Time{}))
	})
	if err != nil {
		s.e.logger.Warn("the end of a pause could not be written; trying again in a second", "subscription", s.name, "error", err)
		s.pause.mu.Lock()
		if s.pause.until.Equal(until) {
			s.pause.timer = s.e.clock.AfterFunc(time.Second, func() { s.endPause(until) })
		}
		s.pause.mu.Unlock()
		return
	}
	s.pause.mu.Lock()
	if !s.pause.until.Equal(until) { // paused again while the write ran
		s.pause.mu.Unlock()
		return
	}
	s.pause.until, s.pause.timer = time.Time{}, nil
	s.gate.set(true)
	s.pause.mu.Unlock()
	s.e.logger.Info("subscription unpaused: its pause ended", "subscription", s.name, "until", until)
}

// PauseUntil pauses a subscription as Pause does, until the time given: then
// it goes on by itself (the end is kept in the ledger, so a restart keeps
// it). Unpause ends it sooner; Pause makes it last until an Unpause.
func (e *Engine) PauseUntil(ctx context.Context, sub string, until time.Time) error {
	if !until.After(e.clock.Now()) {
		return fmt.Errorf("%w: pause until %s, which is not in the future", ErrBadUntil, until.UTC().Format(time.RFC3339))
	}
	return e.setPause(ctx, sub, true, until)
}
