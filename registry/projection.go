package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/subscription"
	"github.com/berthhq/berth/wasm/abi"
)

// maxProjectionRuns is how often one attempt runs a projection's handler
// when its reads were changed under it before it is reported as a conflict.
const maxProjectionRuns = 3

// sweepBatch is how many keys of retired read models one transaction
// removes.
const sweepBatch = 256

var errConflict = errors.New("keys the call read were changed by another call before its writes were applied")

// Projections is the host's query store: the read models of projections,
// kept in the ledger under each subscription's namespace. It is safe for
// concurrent use.
//
// A projection's call reads the store (and its own writes) and buffers its
// writes; only when the handler succeeds are they applied, in a ledger
// transaction that also records the event (aggregate version and index) as
// applied, together with other calls' (groupcommit.go). An event at or below that mark is not run again: a retry after a
// failed apply, or a redelivery after a crash (the engine's checkpoint is
// written in batches), never applies an event twice, and an event is only
// marked with its writes, so none is lost. Calls on different aggregates run
// concurrently; one whose reads were changed by another before it applied
// is run again (optimistic concurrency), so read-modify-write handlers such
// as counters stay exact.
type Projections struct {
	store   ledger.Store
	logger  *slog.Logger
	commits groupCommit

	mu       sync.Mutex
	sweeping bool // a sweep goroutine runs
	again    bool // sweep again when it ends
	sweeps   sync.WaitGroup
}

// NewProjections returns the query store over the ledger. writers returns
// how many calls' writes one transaction applies at most
// (subscription.projection-writers), read at every transaction so that a
// reload applies at once (0 or less: DefaultProjectionWriters); a
// nil logger discards. It starts removing read models that a reset retired
// before a restart.
func NewProjections(store ledger.Store, writers func() int, logger *slog.Logger) *Projections {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if writers == nil {
		writers = func() int { return DefaultProjectionWriters }
	}
	p := &Projections{store: store, logger: logger, commits: groupCommit{store: store, size: writers}}
	p.sweepSoon()
	return p
}

// Wait waits for a running removal of retired read models to end (it ends
// by itself, or at the first failure, such as a closed ledger).
func (p *Projections) Wait() { p.sweeps.Wait() }

// sweepSoon removes retired read models in the background, in bounded
// transactions.
func (p *Projections) sweepSoon() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sweeping {
		p.again = true
		return
	}
	p.sweeping = true
	p.sweeps.Add(1)
	go func() {
		defer p.sweeps.Done()
		for {
			err := p.sweep(context.Background())
			p.mu.Lock()
			if err != nil || !p.again {
				p.sweeping = false
				p.mu.Unlock()
				if err != nil && !errors.Is(err, ledger.ErrClosed) {
					p.logger.Warn("removing reset read models failed; the next reset or restart goes on", "error", err)
				}
				return
			}
			p.again = false
			p.mu.Unlock()
		}
	}()
}

func (p *Projections) sweep(ctx context.Context) error {
	for more := true; more; {
		if err := p.store.Update(ctx, func(tx ledger.Tx) error {
			var err error
			more, err = tx.SweepProjections(sweepBatch)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// eventAfter reports whether event (version, index) comes after the mark.
func eventAfter(version uint64, index uint32, markVersion uint64, markIndex uint32) bool {
	return version > markVersion || version == markVersion && index > markIndex
}

// applied reports whether the delivery's event was applied to sub's read
// model, as this host's copy of the ledger knows it (ledger.LocalView): a
// mark another host wrote moments ago may be missed — the guest is then
// called and applyTx, which reads the mark again in its transaction,
// applies nothing — but a mark is never seen that is not there, so no event
// is skipped. On a ledger shared over JetStream this saves a round trip to
// the stream per delivered event.
func (p *Projections) applied(ctx context.Context, sub string, d *subscription.Delivery) (bool, error) {
	var done bool
	err := ledger.LocalView(ctx, p.store, func(tx ledger.Tx) error {
		v, i, ok, err := tx.Applied(sub, d.Commit.AggregateType, d.Commit.AggregateID)
		done = ok && !eventAfter(d.Commit.Version, uint32(d.Index), v, i)
		return err
	})
	return done, err
}

// applyTx applies a successful call's writes with the event's mark in tx,
// unless the event was applied already; errConflict, having written
// nothing, when a key the call read from the store has changed since.
func applyTx(tx ledger.ReadModels, sub string, kv *callKV, d *subscription.Delivery) error {
	c := &d.Commit
	v, i, ok, err := tx.Applied(sub, c.AggregateType, c.AggregateID)
	if err != nil {
		return err
	}
	if ok && !eventAfter(c.Version, uint32(d.Index), v, i) {
		return nil
	}
	for k, r := range kv.reads {
		cur, err := tx.ProjectionGet(sub, k)
		found := err == nil
		if err != nil && !errors.Is(err, ledger.ErrNotFound) {
			return err
		}
		if found != r.found || !bytes.Equal(cur, r.value) {
			return errConflict
		}
	}
	for k, w := range kv.writes {
		if w.deleted {
			err = tx.ProjectionDelete(sub, k)
		} else {
			err = tx.ProjectionPut(sub, k, w.value)
		}
		if err != nil {
			return err
		}
	}
	return tx.SetApplied(sub, c.AggregateType, c.AggregateID, c.Version, uint32(d.Index))
}

// callKV is the key/value port of one call: writes are buffered, reads see
// them first, then the store (and are remembered, to detect conflicts).
type callKV struct {
	ctx    context.Context
	store  ledger.Store
	sub    string
	writes map[string]kvWrite
	reads  map[string]kvRead
}

type kvWrite struct {
	value   []byte
	deleted bool
}

type kvRead struct {
	value []byte
	found bool
}

var _ sandbox.KV = (*callKV)(nil)

func newCallKV(ctx context.Context, store ledger.Store, sub string) *callKV {
	return &callKV{ctx: ctx, store: store, sub: sub, writes: map[string]kvWrite{}, reads: map[string]kvRead{}}
}

// Get returns the call's own write of key, else the stored value.
func (kv *callKV) Get(key string) ([]byte, bool, error) {
	if w, ok := kv.writes[key]; ok {
		return slices.Clone(w.value), !w.deleted, nil
	}
	if r, ok := kv.reads[key]; ok {
		return slices.Clone(r.value), r.found, nil
	}
	var r kvRead
	err := kv.store.View(kv.ctx, func(tx ledger.Tx) error {
		v, err := tx.ProjectionGet(kv.sub, key)
		if errors.Is(err, ledger.ErrNotFound) {
			return nil
		}
		r = kvRead{value: v, found: err == nil}
		return err
	})
	if err != nil {
		return nil, false, err
	}
	kv.reads[key] = r
	return slices.Clone(r.value), r.found, nil
}

// Put buffers a write.
func (kv *callKV) Put(key string, value []byte) error {
	kv.writes[key] = kvWrite{value: slices.Clone(value)}
	return nil
}

// Delete buffers a delete.
func (kv *callKV) Delete(key string) error {
	kv.writes[key] = kvWrite{deleted: true}
	return nil
}

// projectionInvoker runs a projection's handler with the query store as
// its key/value port.
type projectionInvoker struct {
	p       *Projections
	mod     *sandbox.Module
	stamp   *capsuleStamp
	handler string
	sub     string
}

// projectionInvoker returns the invoker of projection handler h; a plain
// one (the key/value port answers Unsupported) when the registry has no
// query store.
func (r *Registry) projectionInvoker(d *deployed, desc abi.Description, h abi.HandlerDesc) subscription.Invoker {
	if r.opts.Projections == nil {
		return wasmInvoker{mod: d.mod, handler: h.Name, stamp: r.stampOf(d)}
	}
	return projectionInvoker{p: r.opts.Projections, mod: d.mod, stamp: r.stampOf(d), handler: h.Name, sub: desc.Processor + "." + h.Name}
}

// Invoke runs the call unless its event was applied already, and applies
// its writes with the event's mark when it succeeds.
//
// The mark is looked up before the call only for a delivery that is not
// Fresh: one that may have been attempted before (a redelivery after a
// restart, a retry, a replay). A Fresh one cannot have been applied, and
// its lookup was the projection's cost of fsync: a Badger read transaction
// waits for every commit in flight to be written (its oracle's readTs), so
// with store.sync "always" each call's lookup waited for the fsync of the
// group ahead (docs/BENCHMARKS.md, session 33). applyTx reads the mark
// again in its transaction, so an event is applied once either way.
func (pi projectionInvoker) Invoke(ctx context.Context, d subscription.Delivery) *retry.Failure {
	if !d.Fresh {
		done, err := pi.p.applied(ctx, pi.sub, &d)
		if err != nil {
			return storeFailure(ctx, err)
		}
		if done {
			return nil // a redelivery of an event whose writes are in the read model
		}
	}
	for run := 1; ; run++ {
		kv := newCallKV(ctx, pi.p.store, pi.sub)
		env := envelope(&d, pi.handler)
		if _, f := call(ctx, pi.mod, &env, d.Timeout, sandbox.Ports{KV: kv}, pi.stamp, d.Subscription); f != nil {
			return f
		}
		// The partition's slot goes to another aggregate while the
		// call's writes wait for their group's commit (and its fsync):
		// more calls share each commit, and the aggregate's order holds,
		// since its next event waits for this one all the same.
		subscription.LeaveSlot(ctx)
		err := pi.p.commits.apply(ctx, pi.sub, kv, &d)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errConflict) && run < maxProjectionRuns && ctx.Err() == nil:
			continue
		case errors.Is(err, errConflict):
			return &retry.Failure{Reported: retry.ReportedBackpressure, Classes: []string{retry.ClassProjectionConflict},
				Message: fmt.Sprintf("%v (%d runs)", err, run)}
		case errors.Is(err, ledger.ErrTooBig):
			return &retry.Failure{Classes: []string{retry.ClassProjectionTooBig}, Message: err.Error()}
		default:
			return storeFailure(ctx, err)
		}
	}
}

// storeFailure is a failure of the query store: the attempt's own end when
// its context is done, else an outage.
func storeFailure(ctx context.Context, err error) *retry.Failure {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &retry.Failure{Classes: []string{retry.ClassTimeout}, Message: err.Error()}
	case ctx.Err() != nil:
		return &retry.Failure{Classes: []string{retry.ClassCanceled}, Message: err.Error()}
	}
	return &retry.Failure{Reported: retry.ReportedSystemic, Classes: []string{retry.ClassProjectionStore}, Message: err.Error()}
}

// onReset returns what a projection's subscription does when it is reset:
// its read model and applied marks are cleared in the reset's transaction,
// whatever the position, so that the events from there on build it again.
// Nil for other kinds.
func (r *Registry) onReset(desc abi.Description, sub string) func(ledger.Tx, uint64) error {
	p := r.opts.Projections
	if desc.Kind != abi.KindProjection || p == nil {
		return nil
	}
	return func(tx ledger.Tx, _ uint64) error {
		if err := tx.ClearProjection(sub); err != nil {
			return err
		}
		p.sweepSoon() // waits for this transaction to end
		return nil
	}
}

// IsProjection reports whether a deployed projection module serves the
// subscription, whose read model the query store then holds.
func (r *Registry) IsProjection(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.mods {
		desc := d.mod.Description()
		if desc.Kind == abi.KindProjection && slices.Contains(subscriptionNames(desc), sub) {
			return true
		}
	}
	return false
}
