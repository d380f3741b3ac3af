package jobs

import (
	"context"
	"sync/atomic"

	"github.com/berthhq/berth/ledger"
)

// ItemStats counts the records this host's jobs acted on since Open, for
// metrics: Done resumed or skipped, Gone no longer parked when met, Failed
// refused by the engine.
type ItemStats struct {
	Done, Gone, Failed uint64
}

// itemCounters is the live form of ItemStats, by action.
type itemCounters struct {
	done, gone, failed [2]atomic.Uint64 // [0] resume, [1] skip
}

// actionIndex is an action's index in itemCounters.
func actionIndex(action string) int {
	if action == ledger.JobSkip {
		return 1
	}
	return 0
}

// Items returns what this host's jobs of action (ledger.JobResume or
// ledger.JobSkip) did to their records since Open.
func (r *Runner) Items(action string) ItemStats {
	i := actionIndex(action)
	return ItemStats{Done: r.items.done[i].Load(), Gone: r.items.gone[i].Load(), Failed: r.items.failed[i].Load()}
}

// States counts the stored jobs by state, every state present (0 when no
// job is in it). It reads every job, as Recent does.
func (r *Runner) States(ctx context.Context) (map[ledger.JobState]int, error) {
	all, err := r.all(ctx)
	if err != nil {
		return nil, err
	}
	out := map[ledger.JobState]int{ledger.JobRunning: 0, ledger.JobDone: 0, ledger.JobCancelled: 0}
	for _, j := range all {
		out[j.State]++
	}
	return out, nil
}
