package subscription

import (
	"context"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/retry"
)

// keptCtxInvoker keeps each attempt's context (and, if askDone, asks for
// its Done) and says it is ContextFree when free.
type keptCtxInvoker struct {
	free, askDone bool
	now           func() time.Time
	kept          []context.Context
}

func (k *keptCtxInvoker) Invoke(ctx context.Context, _ Delivery) *retry.Failure {
	if ctx.Err() != nil {
		return &retry.Failure{Message: "ended before the call: " + ctx.Err().Error()}
	}
	if dl, _ := ctx.Deadline(); !dl.Equal(k.now().Add(time.Second)) {
		return &retry.Failure{Message: "deadline " + dl.String() + ", not the attempt's"}
	}
	if k.askDone {
		ctx.Done()
	}
	k.kept = append(k.kept, ctx)
	return nil
}

func (k *keptCtxInvoker) KeepsNoContext() bool { return k.free }

// An invoker that says it keeps no context (ContextFree) has its attempts'
// contexts reused, each running and on its own deadline when its attempt
// starts; one that does not say so, or asked for Done, has a context of
// its own each attempt, which reads context.Canceled after the attempt.
func TestAttemptCtxReusedOnlyWhenTheInvokerKeepsNone(t *testing.T) {
	for _, tt := range []struct {
		name          string
		free, askDone bool
		reused        bool
	}{
		{"context free", true, false, true},
		{"context free, Done asked for", true, true, false},
		{"keeps its context", false, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inv := &keptCtxInvoker{free: tt.free, askDone: tt.askDone}
			s := spec(sub, inv)
			s.OverrideRetry = retry.Settings{MaxAttempts: 2, Timeout: time.Second}
			e := newEnv(t, Options{}, s)
			inv.now = e.clock.Now
			e.start()
			attempt := e.eng.Attempter(sub)
			d := Delivery{Attempt: 1, Commit: eventlog.Commit{AggregateType: "Order", AggregateID: "o", Version: 1,
				Events: []eventlog.Event{{Type: "OrderPlaced"}}}}
			const n = 20
			for i := range n {
				if f := attempt(context.Background(), d); f != nil {
					t.Fatalf("attempt %d: %+v", i, f)
				}
				e.clock.Advance(time.Millisecond) // each attempt's deadline its own
			}
			seen := map[*attemptCtx]bool{}
			for _, ctx := range inv.kept {
				seen[ctx.(*attemptCtx)] = true
			}
			// sync.Pool may drop what it holds (a GC), so reuse is fewer
			// contexts than attempts, not exactly one.
			if reused := len(seen) < n; reused != tt.reused {
				t.Fatalf("%d contexts for %d attempts; want reused %v", len(seen), n, tt.reused)
			}
			if !tt.reused {
				for i, ctx := range inv.kept {
					if ctx.Err() != context.Canceled {
						t.Fatalf("attempt %d's context after it: %v; want context.Canceled", i, ctx.Err())
					}
				}
			}
		})
	}
}
