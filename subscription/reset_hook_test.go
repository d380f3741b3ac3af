package subscription

import (
	"context"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"slices"
	"testing"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
)

// TestResetHook: a Spec's OnReset runs in the transaction that writes the
// checkpoint, after the attempts ended; when it fails, neither its writes
// nor the checkpoint change and delivery goes on from where it was.
func TestResetHook(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name     string
		hookErr  error
		wantErr  error
		wantSeen []uint64 // versions of "a" handled in all; nil: not checked
		wantMeta bool     // the hook's write is stored
	}{
		{"hook succeeds", nil, nil, []uint64{1, 2, 1, 2}, true},
		// The old checkpoint stays: delivery goes on from the durable one,
		// which may redeliver what was not yet checkpointed.
		{"hook fails", boom, boom, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := clock.NewFake(t0)
			rec := newRecorder(clock, nil)
			var positions []uint64
			sp := spec(sub, rec)
			sp.OnReset = func(tx ledger.Tx, position uint64) error {
				positions = append(positions, position)
				if err := tx.SetMeta(sub, "reset-by-hook", []byte("yes")); err != nil {
					return err
				}
				return tc.hookErr
			}
			e := newEnv(t, Options{}, sp)
			e.clock = clock
			e.start()
			ctx := context.Background()
			e.append("Order", "a")
			e.append("Order", "a")
			rec.waitHandled(t, "a", 2)
			err := e.eng.Reset(ctx, sub, 1, Caller{})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Reset: %v, want %v", err, tc.wantErr)
			}
			if !slices.Equal(positions, []uint64{1}) {
				t.Errorf("hook called with %v, want [1]", positions)
			}
			rec.waitHandled(t, "a", max(2, len(tc.wantSeen)))
			e.append("Order", "a")
			checkfor.Eventually(t, func() error {
				if got := rec.handled("a"); !slices.Contains(got, 3) {
					return fmt.Errorf("a handled %v, want version 3", got)
				}
				return nil
			})
			if got := rec.handled("a"); tc.wantSeen != nil && !slices.Equal(got, append(tc.wantSeen, 3)) {
				t.Errorf("handled %v, want %v then 3", got, tc.wantSeen)
			}
			var stored bool
			if err := e.store.View(ctx, func(tx ledger.Tx) error {
				_, err := tx.Meta(sub, "reset-by-hook")
				stored = err == nil
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if stored != tc.wantMeta {
				t.Errorf("the hook's write stored: %v, want %v", stored, tc.wantMeta)
			}
		})
	}
}
