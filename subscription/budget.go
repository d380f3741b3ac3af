package subscription

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/berthhq/berth/ledger"
)

// The retry budget spent on an event is kept in the ledger while the event
// is being retried, so that a restart (or a crash) in the middle of a
// backoff continues the budget instead of starting it afresh: the host
// counts every failed attempt, not every attempt since it last started. It
// is written only after a failure and removed when the event is handled or
// parked, so a healthy event costs nothing.

// metaBudgets is the Meta key of the list of aggregates that may have a
// spent budget recorded. Reading it once per run keeps the lookup off the
// path of every delivery: only an aggregate on the list is looked up.
const metaBudgets = "budgets"

// budgetHints is the run's copy of that list. It may name aggregates whose
// budget is already gone (a park removes the budget in its own transaction);
// such a name costs one needless lookup, never a wrong budget.
type budgetHints struct {
	once sync.Once
	mu   sync.Mutex // held across a write of the list, so writes are ordered
	keys map[string]bool
}

// hinted reports whether k may have a recorded budget.
func (r *run) hinted(k string) bool {
	h := r.loadHints()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.keys[k]
}

// mayHaveBudget is hinted for an aggregate, on the path of every delivery:
// while no budget is recorded (the list is empty), it answers without
// building the aggregate's budget key.
func (r *run) mayHaveBudget(k aggKey) bool {
	h := r.loadHints()
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.keys) > 0 && h.keys[budgetKey(k)]
}

// loadHints reads the list once per run.
func (r *run) loadHints() *budgetHints {
	h := &r.budgets
	h.once.Do(func() {
		h.keys = map[string]bool{}
		var b []byte
		err := r.e.store.View(r.ctx, func(tx ledger.Tx) error {
			var err error
			b, err = tx.Meta(r.s.name, metaBudgets)
			return err
		})
		var keys []string
		if err == nil && json.Unmarshal(b, &keys) == nil {
			for _, k := range keys {
				h.keys[k] = true
			}
		}
	})
	return h
}

// writeHints adds k to the stored list (or, with add false, removes it), in
// tx. It changes the list as stored, not as this run remembers it: on a
// ledger shared by several hosts each adds and removes its own aggregates'
// names, and a transaction run again (optimistic concurrency) reads the list
// afresh. r.budgets.mu held.
func (r *run) writeHints(tx ledger.SubscriptionState, k string, add bool) error {
	set := map[string]bool{}
	b, err := tx.Meta(r.s.name, metaBudgets)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
	case err != nil:
		return err
	default:
		var keys []string
		if json.Unmarshal(b, &keys) == nil {
			for _, k := range keys {
				set[k] = true
			}
		}
	}
	if set[k] == add {
		return nil
	}
	if add {
		set[k] = true
	} else {
		delete(set, k)
	}
	if len(set) == 0 {
		return tx.DeleteMeta(r.s.name, metaBudgets)
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if b, err = json.Marshal(keys); err != nil {
		return err
	}
	return tx.SetMeta(r.s.name, metaBudgets, b)
}

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
	// Key is the event's invocation key; empty in budgets written before
	// they kept it, whose event had the old form (legacyInvocationKey).
	Key string `json:"key,omitempty"`
}

// loadBudget restores what was spent on event (version, idx) before a
// restart; a budget of another event of the aggregate is stale and ignored.
func (r *run) loadBudget(k aggKey, version uint64, idx int, st *attempts) {
	if !r.mayHaveBudget(k) {
		return
	}
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
	st.key = sb.Key
	if st.key == "" {
		st.key = legacyInvocationKey(r.s.name, k.id, version, idx)
	}
	st.stored = true
}

// saveBudget records what was spent on event (version, idx) of k, in
// partition p, so far.
func (r *run) saveBudget(p *partition, k aggKey, version uint64, idx int, st *attempts) {
	sb := storedBudget{Version: version, Index: idx, Attempts: st.n, Failures: st.failures,
		Backpressure: st.backpressure, First: st.first, Last: st.last, History: st.history, Key: st.key}
	err := r.recordBudget(k, sb, func(put func(ledger.Tx) error) error {
		return p.update(context.WithoutCancel(p.ctx), put)
	})
	if errors.Is(err, ledger.ErrFenced) {
		return // said by fence; the attempt ends as cancelled
	}
	if err != nil {
		r.e.logger.Warn("recording an aggregate's spent retry budget failed", "subscription", r.s.name, "aggregate", k.String(), "error", err)
		return
	}
	st.stored = true
}

// recordBudget records sb as k's budget: update runs the transaction,
// calling put in it, which writes the budget and keeps the list of hints in
// step. The list is held (r.budgets.mu) across update, so that its writes
// are ordered; update may run withCheckpoint beneath it.
func (r *run) recordBudget(k aggKey, sb storedBudget, update func(put func(ledger.Tx) error) error) error {
	b, err := json.Marshal(sb)
	if err != nil {
		return err
	}
	bk := budgetKey(k)
	r.hinted(bk) // the list is loaded before it is changed
	h := &r.budgets
	h.mu.Lock()
	defer h.mu.Unlock()
	added := !h.keys[bk]
	err = update(func(tx ledger.Tx) error {
		if err := tx.SetMeta(r.s.name, bk, b); err != nil || !added {
			return err
		}
		return r.writeHints(tx, bk, true)
	})
	if err == nil {
		h.keys[bk] = true // after the commit: the transaction may run more than once
	}
	return err
}

// clearBudget forgets a handled event's budget, if one was recorded.
func (r *run) clearBudget(p *partition, k aggKey, st *attempts) {
	if !st.stored {
		return
	}
	r.forgetBudget(p, k, true)
	st.stored = false
}

// forgetBudget removes k, of partition p, from the list (and, with entry,
// its budget: a park has already removed it in its own transaction).
func (r *run) forgetBudget(p *partition, k aggKey, entry bool) {
	bk := budgetKey(k)
	if !r.hinted(bk) {
		return
	}
	h := &r.budgets
	h.mu.Lock()
	defer h.mu.Unlock()
	err := p.update(context.WithoutCancel(p.ctx), func(tx ledger.Tx) error {
		if entry {
			if err := tx.DeleteMeta(r.s.name, bk); err != nil {
				return err
			}
		}
		return r.writeHints(tx, bk, false)
	})
	if err == nil {
		delete(h.keys, bk) // after the commit; a failed one leaves a name that costs a lookup
		return
	}
	if !errors.Is(err, ledger.ErrFenced) {
		r.e.logger.Warn("forgetting a handled event's retry budget failed", "subscription", r.s.name, "aggregate", k.String(), "error", err)
	}
}
