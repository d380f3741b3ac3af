package subscription

import (
	"context"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// TestPauseUntil: a pause until a time holds delivery back, says when it
// ends, survives a restart, and ends by itself on the clock; Unpause ends it
// sooner and Pause makes it last; an end not in the future is refused.
func TestPauseUntil(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clock := clock.NewFake(time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC))
	open := func() (*Engine, *eventlog.Badger, *ledger.Badger) {
		t.Helper()
		events, err := eventlog.Open(dir+"/events", eventlog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		store, err := ledger.Open(dir+"/ledger", ledger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e, err := Open(events, store, Options{Clock: clock, Partitions: 1}, Spec{Name: "S.h", Start: StartBeginning,
			Invoker: InvokerFunc(func(context.Context, Delivery) *retry.Failure { return nil })})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return e, events, store
	}
	e, events, store := open()
	until := clock.Now().Add(time.Hour)
	if err := e.PauseUntil(ctx, "S.h", clock.Now(), Caller{}); !errors.Is(err, ErrBadUntil) {
		t.Errorf("pause until now: %v, want ErrBadUntil", err)
	}
	if err := e.PauseUntil(ctx, "S.h", until, Caller{}); err != nil {
		t.Fatal(err)
	}
	st, _ := e.Status(ctx, "S.h")
	if st.State != StatePaused || !st.PausedUntil.Equal(until) {
		t.Fatalf("status %s until %v; want paused until %v", st.State, st.PausedUntil, until)
	}
	// A restart keeps the pause and its end.
	e.Close(ctx)
	events.Close(ctx)
	store.Close(ctx)
	e, events, store = open()
	defer func() { e.Close(ctx); events.Close(ctx); store.Close(ctx) }()
	st, _ = e.Status(ctx, "S.h")
	if st.State != StatePaused || !st.PausedUntil.Equal(until) {
		t.Fatalf("after a restart: %s until %v", st.State, st.PausedUntil)
	}
	clock.Advance(59 * time.Minute)
	if st, _ = e.Status(ctx, "S.h"); st.State != StatePaused {
		t.Fatalf("a minute before its end: %s", st.State)
	}
	clock.Advance(time.Minute)
	checkfor.Eventually(t, func() error {
		if st, _ := e.Status(ctx, "S.h"); st.State != StateRunning {
			return fmt.Errorf("S.h %s until %v, want the pause ended", st.State, st.PausedUntil)
		}
		return nil
	})
	if st, _ = e.Status(ctx, "S.h"); !st.PausedUntil.IsZero() {
		t.Errorf("running, yet paused until %v", st.PausedUntil)
	}
	// Unpause ends one sooner; Pause makes one last.
	if err := e.PauseUntil(ctx, "S.h", clock.Now().Add(time.Hour), Caller{}); err != nil {
		t.Fatal(err)
	}
	if err := e.Unpause(ctx, "S.h", Caller{}); err != nil {
		t.Fatal(err)
	}
	if st, _ = e.Status(ctx, "S.h"); st.State != StateRunning {
		t.Errorf("after Unpause: %s", st.State)
	}
	if err := e.PauseUntil(ctx, "S.h", clock.Now().Add(time.Hour), Caller{}); err != nil {
		t.Fatal(err)
	}
	if err := e.Pause(ctx, "S.h", Caller{}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Hour)
	if st, _ = e.Status(ctx, "S.h"); st.State != StatePaused || !st.PausedUntil.IsZero() {
		t.Errorf("Pause after a timed pause: %s until %v; want paused with no end", st.State, st.PausedUntil)
	}
}
