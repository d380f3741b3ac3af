package subscription

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
)

// pauseState is a subscription's operator pause beyond its gate: when a
// pause has an end ("pause until"), the time and the timer that unpauses it.
type pauseState struct {
	mu    sync.Mutex
	until time.Time // zero: not paused, or paused until an operator unpauses
	timer clock.Timer
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
	return s.applyPauseLocked(paused, until)
}

// applyPauseLocked is applyPause with s.pause.mu held.
func (s *subscription) applyPauseLocked(paused bool, until time.Time) bool {
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
// was paused or unpaused again meanwhile. The end is written only if the
// ledger still holds this pause: on a ledger shared by several hosts each
// one ends the pause on its own clock, and another host may have paused
// again since (its word may not have reached this one yet) — then the
// stored state is applied instead. A ledger that refuses the write (a full
// disk) is tried again each second; the gate stays closed till then.
func (s *subscription) endPause(until time.Time) {
	if !s.pausedUntil().Equal(until) {
		return
	}
	var stored []byte
	err := s.e.store.Update(context.Background(), func(tx ledger.Tx) error {
		v, err := tx.Meta(s.name, metaPaused)
		if err != nil && !errors.Is(err, ledger.ErrNotFound) {
			return err
		}
		if !bytes.Equal(v, pauseValue(true, until)) {
			stored = v
			return nil
		}
		stored = pauseValue(false, time.Time{})
		if err := tx.SetMeta(s.name, metaPaused, stored); err != nil {
			return err
		}
		return notifyPauseChange(Caller{Reason: "the pause's until passed"}, tx, s.name, v, stored, s.e.clock.Now())
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
	s.pause.timer = nil
	paused := s.applyPauseLocked(parsePause(stored))
	s.pause.mu.Unlock()
	if paused {
		s.e.logger.Info("subscription stays paused: its pause was changed on another host", "subscription", s.name, "until", until)
		return
	}
	s.e.logger.Info("subscription unpaused: its pause ended", "subscription", s.name, "until", until)
}

// RefreshPause applies the pause state the ledger holds for a subscription:
// how a host learns of a pause, unpause or pause until that another host of
// a shared ledger stored (the cluster tells every host to refresh). A run
// started later reads it anyway.
func (e *Engine) RefreshPause(ctx context.Context, sub string) error {
	s, err := e.sub(sub)
	if err != nil {
		return err
	}
	var v []byte
	if err := e.store.View(ctx, func(tx ledger.Tx) error {
		var err error
		v, err = tx.Meta(s.name, metaPaused)
		if errors.Is(err, ledger.ErrNotFound) {
			v, err = nil, nil
		}
		return err
	}); err != nil {
		return err
	}
	s.applyPause(parsePause(v))
	return nil
}

// PauseUntil pauses a subscription as Pause does, until the time given: then
// it goes on by itself (the end is kept in the ledger, so a restart keeps
// it). Unpause ends it sooner; Pause makes it last until an Unpause.
func (e *Engine) PauseUntil(ctx context.Context, sub string, until time.Time, by Caller) error {
	if !until.After(e.clock.Now()) {
		return fmt.Errorf("%w: pause until %s, which is not in the future", ErrBadUntil, until.UTC().Format(time.RFC3339))
	}
	return e.setPause(ctx, sub, true, until, by)
}
