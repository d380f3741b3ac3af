package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// Payload is the JSON body of a delivery: every field of the notification
// ("seq", "type", "time", "subscription", "aggregateType", "aggregateId",
// "version", and when set "error", "actor", "by", "reason", and a failure
// group's "group" and "count"), plus "id", the
// notification's Seq in decimal, the same for every attempt (a receiver
// deduplicates on it), and "hook", the hook's name.
type Payload struct {
	ID   string `json:"id"`
	Hook string `json:"hook"`
	ledger.Notification
}

// worker delivers to one hook, in Seq order, one notification at a time.
type worker struct {
	d    *Dispatcher
	name string
	wake chan struct{}

	mu      sync.Mutex
	hook    Hook
	gen     int  // counts changes of URL or secret, which reset a delivery
	loaded  bool // cursor and durable were read from the ledger
	cursor  uint64
	durable uint64    // the cursor as last written to the ledger
	cur     *delivery // in flight; nil when none
	st      HookStats // counters and last error
	cancel  context.CancelFunc
	done    chan struct{}
	// waits counts the waits the worker began, having found nothing to do
	// now; waiting is the length of the one it is in, 0 while it works.
	// Nothing in the dispatcher reads them: they let the package's tests
	// know the worker has looked at the outbox and the clock as set up,
	// instead of sleeping and hoping it did.
	waits   uint64
	waiting time.Duration
}

// delivery is the notification a hook is trying to deliver.
type delivery struct {
	n        ledger.Notification
	attempts int       // failed so far
	next     time.Time // when it may be tried; zero: now
}

func newWorker(d *Dispatcher, h Hook) *worker {
	return &worker{d: d, name: h.Name, hook: h, wake: make(chan struct{}, 1)}
}

func (w *worker) setRun(cancel context.CancelFunc, done chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cancel, w.done = cancel, done
}

// stop cancels the worker's goroutine and returns its done channel (nil if
// it never ran).
func (w *worker) stop() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		w.cancel()
	}
	if w.done == nil {
		return nil
	}
	return w.done
}

func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// reconfigure applies a changed hook of the same name.
func (w *worker) reconfigure(h Hook) {
	w.mu.Lock()
	old := w.hook
	if old.equal(h) {
		w.mu.Unlock()
		return
	}
	w.hook = h
	if old.URL != h.URL || !old.sameKeys(h) {
		w.gen++
		if w.cur != nil {
			w.cur.attempts, w.cur.next = 0, time.Time{}
		}
	}
	w.mu.Unlock()
	w.poke()
}

// stats returns the worker's statistics (Pending not counted), its hook,
// and whether Cursor was read from the ledger yet.
func (w *worker) stats() (HookStats, Hook, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.st
	s.Name, s.Cursor = w.name, w.cursor
	if w.cur != nil {
		s.Attempts = w.cur.attempts
		if w.cur.attempts > 0 {
			s.NextAttempt = w.cur.next
		}
	}
	return s, w.hook, w.loaded
}

func (w *worker) nextAttempt() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur == nil {
		return time.Time{}, false
	}
	return w.cur.next, true
}

// run delivers until ctx is done.
func (w *worker) run(ctx context.Context) {
	for {
		progressed := w.step(ctx)
		if ctx.Err() != nil {
			return
		}
		if progressed {
			continue
		}
		wait := w.d.opts.PollInterval
		if next, ok := w.nextAttempt(); ok {
			wait = min(wait, next.Sub(w.d.now()))
		}
		if wait <= 0 {
			continue
		}
		t := time.NewTimer(wait)
		w.setWaiting(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-w.wake:
		case <-t.C:
		}
		w.setWaiting(0)
		t.Stop()
	}
}

// setWaiting records that the worker begins a wait of d, or (d 0) ends one.
func (w *worker) setWaiting(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d > 0 {
		w.waits++
	}
	w.waiting = d
}

// step does one thing: reads the cursor, picks the next notification, or
// makes an attempt when one is due. It reports whether the hook moved on
// (so the next step should come at once).
func (w *worker) step(ctx context.Context) bool {
	if !w.load(ctx) {
		return false
	}
	w.persist(ctx) // retries a cursor write that failed
	if !w.pick(ctx) {
		return false
	}

	w.mu.Lock()
	cur, hook, gen := w.cur, w.hook, w.gen
	n, due := cur.n, !w.d.now().Before(cur.next)
	w.mu.Unlock()
	if !due {
		return false
	}
	if !hook.Wants(n.Type, n.Subscription) { // the filters changed
		w.mu.Lock()
		w.doneLocked(n.Seq)
		w.mu.Unlock()
		w.persist(ctx)
		return true
	}

	if !w.claim(ctx) {
		return false
	}
	retryAfter, err := w.send(ctx, hook, n)
	if err != nil && ctx.Err() != nil {
		return false // abandoned: tried again later
	}
	now := w.d.now()
	w.mu.Lock()
	if err == nil {
		w.st.Delivered++
		w.st.LastError = ""
		w.doneLocked(n.Seq)
		w.mu.Unlock()
		w.d.log.Debug("webhook: delivered", "hook", w.name, "seq", n.Seq, "type", n.Type)
		w.persist(ctx)
		return true
	}
	w.st.FailedAttempts++
	w.st.LastError = err.Error()
	if w.gen != gen { // reconfigured meanwhile: the attempt does not count
		w.mu.Unlock()
		return false
	}
	cur.attempts++
	attempts := cur.attempts
	if attempts >= w.d.opts.MaxAttempts {
		w.st.Dropped++
		w.doneLocked(n.Seq)
		w.mu.Unlock()
		w.d.log.Error("webhook: delivery dropped", "hook", w.name, "seq", n.Seq, "type", n.Type,
			"subscription", n.Subscription, "aggregateType", n.AggregateType, "aggregateId", n.AggregateID,
			"attempts", attempts, "error", err)
		w.persist(ctx)
		return true
	}
	delay := w.d.opts.backoff(attempts)
	if retryAfter > 0 {
		delay = min(retryAfter, MaxRetryAfter)
	}
	cur.next = now.Add(delay)
	w.mu.Unlock()
	w.d.log.Warn("webhook: delivery failed", "hook", w.name, "seq", n.Seq, "type", n.Type,
		"attempt", attempts, "retryIn", delay, "error", err)
	return false
}

// forget drops what the worker read from the ledger and the delivery in
// flight, so that its next run reads the durable cursor again. Call it
// only while the worker's goroutine is not running.
func (w *worker) forget() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.loaded, w.cur = false, nil
}

// load reads the durable cursor once per run.
func (w *worker) load(ctx context.Context) bool {
	w.mu.Lock()
	loaded := w.loaded
	w.mu.Unlock()
	if loaded {
		return true
	}
	var c uint64
	err := w.d.store.View(ctx, func(tx ledger.Tx) (err error) {
		c, err = readCursor(tx, w.name)
		return err
	})
	if err != nil {
		w.storeError(ctx, "reading the cursor", err)
		return false
	}
	w.mu.Lock()
	w.cursor, w.durable, w.loaded = c, c, true
	w.mu.Unlock()
	return true
}

// pick makes sure a delivery is in flight: it reads the outbox after the
// cursor, moves the cursor over the notifications the hook does not want,
// and takes the first it wants. It reports whether one is in flight.
func (w *worker) pick(ctx context.Context) bool {
	w.mu.Lock()
	cursor, hook, busy := w.cursor, w.hook, w.cur != nil
	w.mu.Unlock()
	if busy {
		return true
	}
	var ns []ledger.Notification
	err := w.d.store.View(ctx, func(tx ledger.Tx) (err error) {
		ns, err = tx.Notifications(cursor, w.d.opts.BatchSize)
		return err
	})
	if err != nil {
		w.storeError(ctx, "reading the outbox", err)
		return false
	}
	var skipped uint64
	var next *delivery
	for _, n := range ns {
		if hook.Wants(n.Type, n.Subscription) {
			next = &delivery{n: n}
			break
		}
		skipped = n.Seq
	}
	w.mu.Lock()
	w.cursor = max(w.cursor, skipped)
	w.cur = next
	w.mu.Unlock()
	if skipped > 0 {
		w.persist(ctx)
	}
	return next != nil
}

// doneLocked ends the delivery in flight, of seq, and moves the cursor
// past it (in memory; persist writes it). w.mu is held.
func (w *worker) doneLocked(seq uint64) {
	w.cur = nil
	w.cursor = max(w.cursor, seq)
}

// claim checks that the Run's fence still holds right before a delivery is
// sent: a host whose webhooks duty moved on sends nothing more. A View is
// enough: it reads the ledger as current as an Update would (a shared
// ledger catches up first), without queueing behind this host's writes.
// Unfenced (a single host), it reads nothing.
func (w *worker) claim(ctx context.Context) bool {
	fence := w.d.runFence()
	if !fence.Fenced() {
		return true
	}
	err := w.d.store.View(ctx, fence.Check)
	if err != nil && !w.d.checkFenced(err) {
		w.storeError(ctx, "checking the webhooks duty", err)
	}
	return err == nil
}

// persist writes the cursor to the ledger when it moved. The write is not
// cancelled with ctx, so a delivery that succeeded as the dispatcher stops
// is not sent again; a write that fails is tried again at the next step.
func (w *worker) persist(ctx context.Context) {
	w.mu.Lock()
	c, durable := w.cursor, w.durable
	w.mu.Unlock()
	if c <= durable {
		return
	}
	var stored uint64
	fence := w.d.runFence()
	err := w.d.store.Update(context.WithoutCancel(ctx), func(tx ledger.Tx) (err error) {
		if err := fence.Check(tx); err != nil {
			return err
		}
		// Never back: on a shared ledger another host's dispatcher may
		// have delivered further during a handover.
		if stored, err = readCursor(tx, w.name); err != nil || stored >= c {
			return err
		}
		return writeCursor(tx, w.name, c)
	})
	if err != nil {
		if !w.d.checkFenced(err) {
			w.storeError(ctx, "writing the cursor", err)
		}
		return
	}
	w.mu.Lock()
	w.durable = max(w.durable, c, stored)
	w.mu.Unlock()
	w.d.pokeAck()
}

func (w *worker) storeError(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return
	}
	w.d.log.Error("webhook: "+what+" failed", "hook", w.name, "error", err)
}

// send makes one attempt. It returns the delay a 429 or 503 answer asked
// for with Retry-After (0 when none), and an error unless the answer was
// 2xx. Errors never hold the URL, which may hold a token.
func (w *worker) send(ctx context.Context, hook Hook, n ledger.Notification) (time.Duration, error) {
	id := strconv.FormatUint(n.Seq, 10)
	body, err := json.Marshal(Payload{ID: id, Hook: hook.Name, Notification: n})
	if err != nil {
		return 0, fmt.Errorf("encode: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, w.d.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.URL, bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("cannot build the request from the URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set(HeaderEvent, n.Type)
	req.Header.Set(HeaderDelivery, id)
	ts := w.d.now().Unix()
	// Set, not Add: the lower-case names Standard Webhooks spells are sent
	// in Go's canonical form, which HTTP reads without regard to case.
	req.Header.Set(HeaderWebhookID, id)
	req.Header.Set(HeaderWebhookTimestamp, strconv.FormatInt(ts, 10))
	if sigs := hook.signatures(id, ts, body); sigs != "" {
		req.Header.Set(HeaderWebhookSignature, sigs)
	}
	if hook.Secret != "" {
		req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(HeaderSignature, Sign(hook.Secret, ts, body))
	}
	resp, err := w.d.opts.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, fmt.Errorf("POST: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return 0, nil
	}
	var retryAfter time.Duration
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		retryAfter = retry.ParseRetryAfter(resp.Header.Get("Retry-After"), w.d.now())
	}
	return retryAfter, fmt.Errorf("answered %s", resp.Status)
}
