// Package jobs runs an operator's bulk actions: resume or skip every parked
// aggregate a filter matches, as a durable job kept in the ledger. A job
// acts on one record at a time at a rate limit (so a bulk resume after an
// outage does not flood the service that was down), each action being the
// engine's single resume or skip, so per-aggregate order and what a resume
// or skip does (docs/failure-model.md, section 6) are unchanged. Its
// progress (a cursor in the ledger's key order and its counts) is written
// after every record, so a host that stops, or crashes, goes on where it was
// when it starts again; a record acted on just before a crash is met again
// and counted as gone.
//
// On a ledger several hosts share (Options.Shared), any host stores, reads
// and cancels jobs, and the one host that serves (Serve; the cluster's jobs
// duty) runs them all, looking in the ledger for new and cancelled ones. It
// writes their progress under the duty's claim (ledger.DutyFence), the
// record in flight before it acts on it: a host whose duty moved on is
// refused that write, so it acts on nothing more.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/subscription"
)

// Errors of the runner.
var (
	// ErrInvalid: a job's spec is malformed (action, rate, a subscription
	// that does not exist).
	ErrInvalid = errors.New("invalid job")
	// ErrNotFound: no job has that id.
	ErrNotFound = errors.New("no such job")
	// ErrFinished: the job is done or cancelled already.
	ErrFinished = errors.New("job finished")
)

// Engine is what a job acts through: the subscription engine's single
// resume and skip.
type Engine interface {
	Resume(ctx context.Context, sub, aggregateType, aggregateID string, by subscription.Caller) error
	Skip(ctx context.Context, sub, aggregateType, aggregateID string, throughVersion uint64, by subscription.Caller) error
	Subscriptions() []string
}

// Options configure a Runner. Zero values are defaults.
type Options struct {
	Ledger ledger.Store
	Engine Engine
	// Clock paces jobs (default: real time).
	Clock clock.Clock
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// ItemTimeout bounds one resume or skip (a long-horizon retry in flight
	// holds its aggregate); default 10s. Read at each record, so a reload
	// applies.
	ItemTimeout func() time.Duration
	// Shared says the ledger is shared by several hosts, one of which at a
	// time runs the jobs (the cluster's duty): Open and Create start
	// nothing, and Serve runs every running job of the ledger, whichever
	// host created it, for as long as its context lasts (serve.go). False
	// (a single host): Open goes on with the jobs left running and Create
	// starts its job; Serve is not needed.
	Shared bool
	// Deployed returns the SHA-256 of the module version deployed under
	// name (false: none). A proven job (ledger.JobFilter.Proven) acts only
	// while its candidate is the version deployed: it asks before each
	// batch, and stops the job (cancelled, Stopped saying why) once the
	// deployment moved away. Nil: no module is deployed.
	Deployed func(module string) (sha256 string, ok bool)
	// PollInterval is how often, with Shared, Serve looks in the ledger for
	// jobs created or cancelled on other hosts, and Wait for a change
	// another host made; on Clock. Default 1s.
	PollInterval time.Duration
}

// DefaultPollInterval is the default Options.PollInterval.
const DefaultPollInterval = time.Second

// Spec asks for a job.
type Spec struct {
	Action string // ledger.JobResume or ledger.JobSkip
	Filter ledger.JobFilter
	Actor  string
	Reason string
	Rate   float64 // records a second, above 0
}

// Runner creates, runs and cancels jobs. It is safe for concurrent use.
type Runner struct {
	opts Options
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex
	running map[uint64]context.CancelFunc // jobs with a goroutine
	changed chan struct{}                 // closed and replaced when a job's stored state changes
	// created wakes Serve when this host stored a job (Shared; buffer 1).
	created chan struct{}
	// cancelling holds the jobs a Cancel is stopping, which Serve must not
	// start again before the cancel is stored.
	cancelling map[uint64]bool
	items      itemCounters // what act did, for metrics (stats.go)
}

// pageSize is how many records a job reads from the ledger at once: four
// batches at the most, so that a page is not cut into a batch and a rest.
const pageSize = 4 * batchSize

// Open starts a runner and goes on with every job left running.
func Open(ctx context.Context, opts Options) (*Runner, error) {
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ItemTimeout == nil {
		opts.ItemTimeout = func() time.Duration { return 10 * time.Second }
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r := &Runner{opts: opts, ctx: rctx, stop: stop, running: map[uint64]context.CancelFunc{}, changed: make(chan struct{}),
		created: make(chan struct{}, 1), cancelling: map[uint64]bool{}}
	if opts.Shared {
		return r, nil // Serve goes on with them, on whichever host runs the jobs
	}
	all, err := r.all(ctx)
	if err != nil {
		stop()
		return nil, fmt.Errorf("jobs: %w", err)
	}
	for _, j := range all {
		if j.State == ledger.JobRunning {
			opts.Logger.Info("job goes on", "job", j.ID, "action", j.Action, "done", j.Done, "matched", j.Matched)
			r.start(r.ctx, j, nil)
		}
	}
	return r, nil
}

// all reads every job, oldest first: operators create jobs by the dozen,
// not the million.
func (r *Runner) all(ctx context.Context) ([]*ledger.Job, error) {
	var out []*ledger.Job
	err := r.opts.Ledger.View(ctx, func(tx ledger.Tx) error {
		var after uint64
		for {
			page, err := tx.ListJobs(after, 1000)
			if err != nil || len(page) == 0 {
				return err
			}
			out = append(out, page...)
			after = page[len(page)-1].ID
		}
	})
	return out, err
}

// Close stops every job's goroutine (the jobs stay running in the ledger,
// and the next Open goes on with them) and waits for them, or for ctx.
func (r *Runner) Close(ctx context.Context) error {
	r.stop()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Runner) checkSpec(s Spec) error {
	switch {
	case s.Action != ledger.JobResume && s.Action != ledger.JobSkip:
		return fmt.Errorf("%w: action %q: want resume or skip", ErrInvalid, s.Action)
	case !(s.Rate > 0):
		return fmt.Errorf("%w: rate %v: want records a second above 0", ErrInvalid, s.Rate)
	case s.Filter.State != "" && s.Filter.State != ledger.StateRetrying && s.Filter.State != ledger.StateWaiting &&
		s.Filter.State != ledger.StateResuming:
		return fmt.Errorf("%w: state %q: want retrying, waiting or resuming", ErrInvalid, s.Filter.State)
	}
	known := r.opts.Engine.Subscriptions()
	for _, sub := range s.Filter.Subscriptions {
		if !slices.Contains(known, sub) {
			return fmt.Errorf("%w: no subscription %q", ErrInvalid, sub)
		}
	}
	return nil
}

// subscriptionsOf returns the subscriptions a filter pages through, one
// after the other ("" for all of them at once).
func subscriptionsOf(f ledger.JobFilter) []string {
	if len(f.Subscriptions) == 0 {
		return []string{""}
	}
	return f.Subscriptions
}

// DryRun counts the records spec would act on now and returns up to sample
// of them; nothing changes.
func (r *Runner) DryRun(ctx context.Context, s Spec, sample int) (int, []*ledger.Record, error) {
	if err := r.checkSpec(s); err != nil {
		return 0, nil, err
	}
	return r.match(ctx, s.Filter, sample)
}

func (r *Runner) match(ctx context.Context, f ledger.JobFilter, sample int) (int, []*ledger.Record, error) {
	n := 0
	var some []*ledger.Record
	err := r.opts.Ledger.View(ctx, func(tx ledger.Tx) error {
		n, some = 0, nil
		for _, sub := range subscriptionsOf(f) {
			c, err := tx.CountMatching(f.Filter(sub, "", 0))
			if err != nil {
				return err
			}
			n += c
			for after := ""; len(some) < sample; {
				page, next, err := tx.ListParked(f.Filter(sub, after, sample-len(some)))
				if err != nil {
					return err
				}
				some = append(some, page...)
				if next == "" {
					break
				}
				after = next
			}
		}
		return nil
	})
	return n, some, err
}

// Create stores a new job for spec, counted, and starts it.
func (r *Runner) Create(ctx context.Context, s Spec) (*ledger.Job, error) {
	if err := r.checkSpec(s); err != nil {
		return nil, err
	}
	matched, _, err := r.match(ctx, s.Filter, 0)
	if err != nil {
		return nil, fmt.Errorf("jobs: count: %w", err)
	}
	now := r.opts.Clock.Now().UTC()
	j := &ledger.Job{Action: s.Action, Filter: s.Filter, Actor: s.Actor, Reason: s.Reason, Rate: s.Rate,
		State: ledger.JobRunning, Created: now, Updated: now, Matched: matched}
	if err := r.opts.Ledger.Update(ctx, func(tx ledger.Tx) error { return tx.CreateJob(j) }); err != nil {
		return nil, fmt.Errorf("jobs: store: %w", err)
	}
	r.opts.Logger.Info("job created", "job", j.ID, "action", j.Action, "matched", matched, "rate", j.Rate,
		"actor", j.Actor, "reason", j.Reason)
	if r.opts.Shared {
		select { // a Serve on this host starts it now; another host's at its next poll
		case r.created <- struct{}{}:
		default:
		}
		return j, nil
	}
	r.start(r.ctx, j, nil)
	return j, nil
}

// Get returns one job as stored.
func (r *Runner) Get(ctx context.Context, id uint64) (*ledger.Job, error) {
	var j *ledger.Job
	err := r.opts.Ledger.View(ctx, func(tx ledger.Tx) error {
		var err error
		j, err = tx.Job(id)
		return err
	})
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	return j, err
}

// Recent returns up to limit jobs with ids below before (0: any), newest
// first. It reads every job.
func (r *Runner) Recent(ctx context.Context, before uint64, limit int) ([]*ledger.Job, error) {
	all, err := r.all(ctx)
	if err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(all, func(j *ledger.Job) bool { return before != 0 && j.ID >= before })
	slices.Reverse(out)
	return out[:min(limit, len(out))], nil
}

// Cancel stops a running job where it is; what it did stays done. It
// returns the job as stored, cancelled. With Shared, a job another host
// runs stops there at its next write of progress or that host's next poll
// (it may act on the record it was at).
func (r *Runner) Cancel(ctx context.Context, id uint64, actor string) (*ledger.Job, error) {
	r.mu.Lock()
	stop := r.running[id]
	r.cancelling[id] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.cancelling, id)
		r.mu.Unlock()
	}()
	if stop != nil {
		stop() // the job's goroutine writes nothing more once it sees this
		r.waitStopped(ctx, id)
	}
	var j *ledger.Job
	err := r.opts.Ledger.Update(ctx, func(tx ledger.Tx) error {
		var err error
		if j, err = tx.Job(id); err != nil {
			return err
		}
		if j.State != ledger.JobRunning {
			return fmt.Errorf("%w: job %d is %s", ErrFinished, id, j.State)
		}
		now := r.opts.Clock.Now().UTC()
		j.State, j.Updated, j.Finished = ledger.JobCancelled, now, now
		if err := tx.PutJob(j); err != nil {
			return err
		}
		return tx.Notify(finished(j, actor))
	})
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return nil, fmt.Errorf("%w: %d", ErrNotFound, id)
	case err != nil:
		return nil, err
	}
	r.opts.Logger.Info("job cancelled", "job", id, "by", actor, "done", j.Done, "matched", j.Matched)
	r.notify()
	return j, nil
}

func (r *Runner) waitStopped(ctx context.Context, id uint64) {
	for {
		r.mu.Lock()
		_, running := r.running[id]
		ch := r.changed
		r.mu.Unlock()
		if !running {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// Wait returns once the job is no longer running (done or cancelled), or ctx
// is done. Tests and the CLI's --wait use it. With Shared it also looks
// every PollInterval, since another host may be running the job.
func (r *Runner) Wait(ctx context.Context, id uint64) (*ledger.Job, error) {
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		j, err := r.Get(ctx, id)
		if err != nil || j.State != ledger.JobRunning {
			return j, err
		}
		poll, stop := make(<-chan struct{}), func() bool { return false }
		if r.opts.Shared {
			poll, stop = r.after(r.opts.PollInterval)
		}
		select {
		case <-ch:
		case <-poll:
		case <-ctx.Done():
			stop()
			return j, ctx.Err()
		}
		stop()
	}
}

func (r *Runner) notify() {
	r.mu.Lock()
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}
