package subscription

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/berthhq/berth/ledger"
)

// The retry budget spent on an event is kept in the ledger while the event
// is being retried, so that a restart (or a crash) in the middle of a
// backoff continues the budget instead of starting it afresh: the host
// counts every failed attempt, not every attempt since it last started. It
// is written only after a failure and removed when the event is handled or
// parked, so a healthy event costs nothing.

// budgetKey is the Meta key of an aggregate's budget in its subscription.
func budgetKey(k aggKey) string {
	return "budget/" + strconv.Itoa(len(k.typ)) + ":" + k.typ + "/" + k.id
}

// storedBudget is attempts as the ledger keeps it, for one event.
type storedBudget struct {
	Version      uint64         `json:"version"`
	Index        int            `json:"index"`
	Attempts     int            `json:"attempts"`
	Failures     int            `json:"failures"`
	Backpressure int            `json:"backpressure"`
	First        time.Time      `json:"first"`
	Last         time.Time      `json:"last"`
	History      []ledger.Entry `json:"history,omitempty"`
}

// loadBudget restores what was spent on event (version, idx) before a
// restart; a budget of another event of the aggregate is stale and ignored.
func (r *run) loadBudget(k aggKey, version uint64, idx int, st *attempts) {
	var b []byte
	err := r.e.store.View(r.ctx, func(tx ledger.Tx) error {
		var err error
		b, err = tx.Meta(r.s.name, budgetKey(k))
		return err
	})
	if errors.Is(err, ledger.ErrNotFound) {
		return
	}
	if err != nil {
		r.e.logger.Warn("reading an aggregate's spent retry budget failed; it starts afresh", "subscription", r.s.name, "aggregate", k.String(), "error", err)
		return
	}
	var sb storedBudget
	if json.Unmarshal(b, &sb) != nil || sb.Version != version || sb.Index != idx {
		return
	}
	st.n, st.failures, st.backpressure = sb.Attempts, sb.Failures, sb.Backpressure
	st.first, st.last, st.history = sb.First, sb.Last, sb.History
	st.stored = true
}

// saveBudget records what was spent on event (version, idx) so far.
func (r *run) saveBudget(k aggKey, version uint64, idx int, st *attempts) {
	b, err := json.Marshal(storedBudget{Version: version, Index: idx, Attempts: st.n, Failures: st.failures,
		Backpressure: st.backpressure, First: st.first, Last: st.last, History: st.history})
	if err == nil {
		err = r.e.store.Update(context.WithoutCancel(r.ctx), func(tx ledger.Tx) error {
			return tx.SetMeta(r.s.name, budgetKey(k), b)
		})
	}
	if err != nil {
		r.e.logger.Warn("recording an aggregate's spent retry budget failed", "subscription", r.s.name, "aggregate", k.String(), "error", err)
		return
	}
	st.stored = true
}

// clearBudget forgets a handled event's budget, if one was recorded.
func (r *run) clearBudget(k aggKey, st *attempts) {
	if !st.stored {
		return
	}
	err := r.e.store.Update(context.WithoutCancel(r.ctx), func(tx ledger.Tx) error {
		return tx.DeleteMeta(r.s.name, budgetKey(k))
	})
	if err != nil {
		r.e.logger.Warn("forgetting a handled event's retry budget failed", "subscription", r.s.name, "aggregate", k.String(), "error", err)
	}
	st.stored = false
}
