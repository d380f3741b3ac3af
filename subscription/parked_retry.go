package subscription

import (
	"container/heap"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// scheduler fires the long-horizon retries of parked aggregates on the
// engine's Clock. It keeps the next retry time of every retrying record in
// memory (loaded at start, updated on every park and retry) so that it can
// sleep until the earliest one instead of polling the ledger; the ledger
// record stays the truth, checked again before each retry. It is the one
// schedule: the ledger keeps no index of due records.
//
// The schedule (retry.ParkedSettings.Delay) with the defaults: the first
// retry 3 minutes after the park, each next one after a delay that grows as
// the retry package defines, up to MaxDelay, 10 retries in all, each attempt
// allowed 2 minutes; then the aggregate waits for an operator.
type scheduler struct {
	e    *Engine
	mu   sync.Mutex
	due  map[schedKey]time.Time
	heap schedHeap // every due entry, and stale ones that due no longer holds
	wake chan struct{}
}

type schedKey struct {
	sub string
	agg aggKey
}

// schedEntry is one scheduled time of a key; it is stale once due holds
// another time for the key, or none.
type schedEntry struct {
	at time.Time
	k  schedKey
}

// schedHeap orders entries by time, so that taking what is due and finding
// the earliest cost a logarithm of the parked, not a pass over them.
type schedHeap []schedEntry

func (h schedHeap) Len() int           { return len(h) }
func (h schedHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h schedHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *schedHeap) Push(x any)        { *h = append(*h, x.(schedEntry)) }
func (h *schedHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newScheduler(e *Engine) *scheduler {
	return &scheduler{e: e, due: map[schedKey]time.Time{}, wake: make(chan struct{}, 1)}
}

// add schedules (or reschedules) a parked aggregate's next retry.
func (s *scheduler) add(sub string, k aggKey, at time.Time) {
	sk := schedKey{sub, k}
	s.mu.Lock()
	s.due[sk] = at
	heap.Push(&s.heap, schedEntry{at, sk})
	s.compactLocked()
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *scheduler) remove(sub string, k aggKey) {
	s.mu.Lock()
	delete(s.due, schedKey{sub, k})
	s.compactLocked()
	s.mu.Unlock()
}

// compactLocked drops the stale entries once they outnumber the live ones,
// so that the heap stays within twice the scheduled.
func (s *scheduler) compactLocked() {
	if len(s.heap) <= 2*len(s.due)+64 {
		return
	}
	live := s.heap[:0]
	for _, en := range s.heap {
		if at, ok := s.due[en.k]; ok && at.Equal(en.at) {
			live = append(live, en)
		}
	}
	clear(s.heap[len(live):])
	s.heap = live
	heap.Init(&s.heap)
}

// next returns the earliest scheduled time, and takes out every entry due by
// now.
func (s *scheduler) next(now time.Time) (earliest time.Time, any bool, due []schedKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.heap) > 0 {
		top := s.heap[0]
		at, ok := s.due[top.k]
		if !ok || !at.Equal(top.at) {
			heap.Pop(&s.heap) // stale
			continue
		}
		if at.After(now) {
			return at, true, due
		}
		heap.Pop(&s.heap)
		delete(s.due, top.k)
		due = append(due, top.k)
	}
	return time.Time{}, false, due
}

func (s *scheduler) loop() {
	e := s.e
	defer e.wg.Done()
	for {
		earliest, any, due := s.next(e.clock.Now())
		for _, k := range due {
			sub, err := e.sub(k.sub)
			if err != nil {
				continue
			}
			sub.startParkedRetry(k.agg)
		}
		if len(due) > 0 {
			continue
		}
		var timer clock.Timer
		var fire <-chan time.Time
		if any {
			timer = e.clock.NewTimer(earliest.Sub(e.clock.Now()))
			fire = timer.C()
		}
		select {
		case <-e.ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-s.wake:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// startParkedRetry runs one long-horizon retry in the subscription's current
// run.
func (s *subscription) startParkedRetry(k aggKey) {
	r, release, err := s.current()
	if err != nil {
		return
	}
	defer release()
	r.wg.Add(1)
	go r.parkedRetry(k)
}

// parkedRetry makes one long-horizon attempt at the event a parked aggregate
// stopped at, with the parked attempt timeout. A success resumes the
// aggregate after that event; a failure schedules the next retry, or, when
// they are spent, leaves the aggregate waiting for an operator and says so
// in the outbox. It reads the record (dueRecord), makes the attempt
// (retryAttempt, through the one attempt step) and records what it came
// to (retrySucceeded, retryFailed).
func (r *run) parkedRetry(k aggKey) {
	defer r.wg.Done()
	p := r.livePartition(k)
	if p == nil {
		// Another host owns the aggregate's partition now (or took it from
		// this one): its run schedules the retry from the ledger.
		return
	}
	ctx := p.ctx
	// A paused subscription makes no attempts, parked ones included; the
	// retry runs once it is unpaused.
	// A stopped run leaves the record as it is; the next run schedules it
	// from the ledger.
	if r.s.gate.wait(ctx) != nil {
		return
	}
	unlock := r.s.keys.lock(k)
	defer unlock()
	rec, cur := r.dueRecord(p, k)
	if rec == nil {
		return
	}
	tr := r.e.trace.deliver(ctx, r.s.name, p.idx, eventlog.Commit{AggregateType: k.typ, AggregateID: k.id, Version: rec.Version}, -1, recordKey(rec), true)
	o := outcomeCancelled
	defer func() { tr.end(o) }()
	r.e.trace.restore(recordKey(rec), rec.Traceparent) // the link across a restart
	s := r.retryAttempt(p, tr, cur, k, rec)
	if !s.counted {
		// Stopped mid-attempt, or cut short by the host (the module warming
		// up): not counted; due again after a restart, or as soon as the
		// host is ready.
		if s.ready != nil && ctx.Err() == nil {
			_ = r.awaitHost(ctx, s.ready, k.String(), s.f)
		}
		r.e.sched.add(r.s.name, k, rec.NextRetry)
		return
	}
	r.e.obs.retried(r.s.name, s.f)
	rec.Attempts++
	rec.ParkedRetries++
	if s.f == nil {
		o = r.retrySucceeded(p, k, rec, s.end)
		return
	}
	o = r.retryFailed(p, cur, k, rec, &s)
}

// dueRecord reads the record of parked aggregate k and returns it, with
// the subscription's current settings, when a long-horizon retry is due
// now; else nil, having done what the record asks instead: nothing (it
// is not retrying), schedule it for when it is due, or turn it over to an
// operator.
func (r *run) dueRecord(p *partition, k aggKey) (*ledger.Record, *resolved) {
	ctx := p.ctx
	var rec *ledger.Record
	err := r.e.store.View(ctx, func(tx ledger.Tx) error {
		var err error
		rec, err = tx.Parked(r.s.name, k.typ, k.id)
		return err
	})
	if err != nil {
		if !errors.Is(err, ledger.ErrNotFound) && ctx.Err() == nil {
			r.e.logger.Error("parked retry: reading the record failed", "subscription", r.s.name, "aggregate", k.String(), "err", err)
			r.e.sched.add(r.s.name, k, r.e.clock.Now().Add(time.Minute))
		}
		return nil, nil
	}
	now := r.e.clock.Now()
	if rec.State != ledger.StateRetrying {
		return nil, nil
	}
	if r.e.storeRefuses() != nil {
		// Neither an attempt's outcome nor turning the record over to an
		// operator could be recorded (storefull.go): nothing is tried or
		// counted; it is due again in a minute, or when it was due.
		due := now.Add(time.Minute)
		if rec.NextRetry.After(due) {
			due = rec.NextRetry
		}
		r.e.sched.add(r.s.name, k, due)
		return nil, nil
	}
	cur := r.s.cur.Load()
	if parkedUnrecoverable(rec) && !cur.parked.RetriesUnrecoverable() {
		// Parked unrecoverable while retries were opted in (or by a host
		// before they were not): it waits for an operator, without another
		// attempt.
		note := waitForOperator(rec, now, ledger.WaitUnrecoverable, r.s.name, k)
		r.storeRetry(p, rec, note, nil, k, now)
		return nil, nil
	}
	if rec.NextRetry.After(now) {
		r.e.sched.add(r.s.name, k, rec.NextRetry)
		return nil, nil
	}
	return rec, cur
}

// retryAttempt reads the event rec stopped at from the aggregate's stream
// and makes the attempt at it. An event that cannot be read is a failed
// attempt that called nothing (the attempt metrics do not count it).
func (r *run) retryAttempt(p *partition, tr *deliveryTrace, cur *resolved, k aggKey, rec *ledger.Record) step {
	ctx := p.ctx
	commits, err := r.e.events.ReadAggregate(ctx, k.typ, k.id, rec.Version, 1)
	var unread *retry.Failure
	var c eventlog.Commit
	switch {
	case ctx.Err() != nil:
		return step{}
	case err != nil:
		unread = &retry.Failure{Message: fmt.Sprintf("reading the aggregate's stream: %v", err)}
	case len(commits) == 0 || commits[0].Version != rec.Version || int(rec.Index) >= len(commits[0].Events):
		unread = &retry.Failure{Message: fmt.Sprintf("event %d of version %d is not in the log", rec.Index, rec.Version)}
	default:
		c = commits[0]
		tr.event(c.Events[rec.Index].Type)
	}
	return r.attempt(ctx, tr, cur, Delivery{
		Subscription: r.s.name, Handler: cur.spec.Handler, InvocationKey: recordKey(rec),
		Attempt: rec.Attempts + 1, Commit: c, Index: int(rec.Index), Timeout: cur.parked.Timeout,
	}, unread, true, nil)
}

// retrySucceeded records a long-horizon retry that handled the event:
// the record resumes after it, with the "resumed" notification, and the
// aggregate's held events are replayed.
func (r *run) retrySucceeded(p *partition, k aggKey, rec *ledger.Record, now time.Time) outcome {
	rec.State, rec.NextRetry, rec.WaitReason = ledger.StateResuming, time.Time{}, ""
	rec.Index++ // resume after the event the retry handled
	rec.InvocationKey = eventKey(r.s.name, k, rec.Version, rec.Index)
	rec.AddHistory(ledger.Entry{Time: now, Action: "retry", Attempt: rec.Attempts, Version: rec.Version})
	rec.AddHistory(ledger.Entry{Time: now, Action: "resumed", Version: rec.Version, Actor: actorBerth,
		Reason: fmt.Sprintf("long-horizon retry %d succeeded", rec.ParkedRetries)})
	err := r.withCheckpoint(p.ctx, p, 0, func(tx ledger.Tx) error {
		if err := tx.PutParked(rec); err != nil {
			return err
		}
		return tx.Notify(ledger.Notification{Type: ledger.NotifyResumed, Time: now, Subscription: r.s.name,
			AggregateType: k.typ, AggregateID: k.id, Version: rec.Version, Actor: actorBerth, By: byLongHorizon,
			Reason: "long-horizon retry succeeded"})
	})
	if err != nil {
		// The handler ran; the record still says retrying. Retry the
		// whole step soon: at least once is the contract.
		r.retryLater(p, k, now, err)
		return outcomeHandled
	}
	r.e.obs.resolved(r.s.name, "resume", actorBerth, rec.FirstFailure, now)
	r.e.logger.Info("parked aggregate resumed by its long-horizon retry", "subscription", r.s.name, "aggregate", k.String(),
		"retry", rec.ParkedRetries)
	r.beginReplay(p, k, rec.Version, int(rec.Index), rec.InvocationKey)
	return outcomeHandled
}

// retryFailed records a long-horizon retry that failed: the next retry
// is scheduled, or, when they are spent or the failure is unrecoverable,
// the record waits for an operator and the outbox says so. It returns
// outcomeParked when the aggregate now waits for an operator.
func (r *run) retryFailed(p *partition, cur *resolved, k aggKey, rec *ledger.Record, s *step) outcome {
	f, d, now := s.f, s.d, s.end
	o := outcomeCancelled
	info := errorInfo(f, d)
	rec.Error, rec.LastFailure = info, now
	rec.AddHistory(ledger.Entry{Time: now, Action: "retry", Attempt: rec.Attempts, Version: rec.Version, Error: &info})
	var note *ledger.Notification
	next, ok := cur.parked.Next(rec.ParkedRetries, now)
	switch {
	case d.Class == retry.Unrecoverable && !cur.parked.RetriesUnrecoverable():
		// No retry fixes it: stop here for an operator.
		ok, note = false, waitForOperator(rec, now, ledger.WaitUnrecoverable, r.s.name, k)
	case ok:
		rec.NextRetry = next
	default:
		note = waitForOperator(rec, now, ledger.WaitRetriesSpent, r.s.name, k)
	}
	if note != nil {
		o = outcomeParked // waits for an operator now
	}
	rec.Traceparent = r.e.trace.traceparent(recordKey(rec))
	if !r.storeRetry(p, rec, note, f.Capsule, k, now) {
		return o
	}
	r.logLongRetryFailed(k, rec, next, note != nil)
	if ok {
		r.e.sched.add(r.s.name, k, next)
	}
	return o
}

// waitForOperator turns a retrying record into one waiting for an operator
// for the reason why (a ledger.Wait* constant), with a history entry, and
// returns the "retries-spent" notification that says so.
func waitForOperator(rec *ledger.Record, now time.Time, why, sub string, k aggKey) *ledger.Notification {
	rec.State, rec.NextRetry, rec.WaitReason = ledger.StateWaiting, time.Time{}, why
	action := "retries-spent"
	if why == ledger.WaitUnrecoverable {
		action = "retries-stopped"
	}
	rec.AddHistory(ledger.Entry{Time: now, Action: action, Version: rec.Version, Reason: waitText(why)})
	info := rec.Error
	return &ledger.Notification{Type: ledger.NotifyRetriesSpent, Time: now, Subscription: sub,
		AggregateType: k.typ, AggregateID: k.id, Version: rec.Version, Error: &info, Reason: waitText(why)}
}

// storeRetry stores a parked retry's record, the capsule of its failed
// attempt (nil: the record keeps the one it has; see putCapsule) and its
// notification (nil: none) in one transaction of the aggregate's
// partition p; on a ledger error it schedules the whole step again in a
// minute and reports false.
func (r *run) storeRetry(p *partition, rec *ledger.Record, note *ledger.Notification, capsule []byte, k aggKey, now time.Time) bool {
	write := func(tx ledger.Tx) error {
		if err := tx.PutParked(rec); err != nil {
			return err
		}
		if err := putCapsule(tx, r.s.name, k, capsule); err != nil {
			return err
		}
		if note != nil {
			return tx.Notify(*note)
		}
		return nil
	}
	err := p.update(p.ctx, write)
	if err != nil && r.capsuleTooBig(err, capsule, k) {
		capsule = nil
		err = p.update(p.ctx, write)
	}
	if err != nil {
		r.retryLater(p, k, now, err)
		return false
	}
	return true
}

// retryLater schedules a parked retry whose outcome the ledger did not take
// again in a minute, saying why; a stopped or fenced partition schedules
// nothing (the next run, or owner, schedules it from the ledger).
func (r *run) retryLater(p *partition, k aggKey, now time.Time, err error) {
	if p.ctx.Err() != nil {
		return
	}
	r.e.logger.Error("parked retry: ledger write failed", "subscription", r.s.name, "aggregate", k.String(), "err", err)
	r.e.sched.add(r.s.name, k, now.Add(time.Minute))
}

// actorBerth is the actor of the engine's own resumes.
const actorBerth = "berth"
