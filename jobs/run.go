package jobs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/subscription"
	"golang.org/x/time/rate"
)

// serving is a Serve's part in the jobs it starts: they are counted in wg,
// write under fence, and call fenced when the ledger refused a write for
// the fence (the duty moved on), which stops the Serve.
type serving struct {
	wg     sync.WaitGroup
	fence  ledger.DutyFence
	fenced func()
}

// start runs j in a goroutine of its own, until parent ends (r.ctx, or a
// Serve's, then served is not nil).
// It does nothing if j has a goroutine already, or a Cancel is stopping it.
func (r *Runner) start(parent context.Context, j *ledger.Job, served *serving) {
	ctx, cancel := context.WithCancel(parent)
	r.mu.Lock()
	if _, has := r.running[j.ID]; has || r.cancelling[j.ID] {
		r.mu.Unlock()
		cancel()
		return
	}
	r.running[j.ID] = cancel
	r.mu.Unlock()
	var fence ledger.DutyFence
	if served != nil {
		served.wg.Add(1)
		fence = served.fence
	}
	r.wg.Go(func() {
		if served != nil {
			defer served.wg.Done()
		}
		defer func() {
			cancel()
			r.mu.Lock()
			delete(r.running, j.ID)
			r.mu.Unlock()
			r.notify()
		}()
		err := r.run(ctx, j, fence)
		switch {
		case errors.Is(err, errNotRunning), ctx.Err() != nil && parent.Err() == nil && r.cancelledElsewhere(parent, j.ID):
			// Cancelled on another host (Shared), whose Cancel wrote the
			// state: this goroutine's next write found it, or Serve's scan
			// saw it first and stopped the goroutine.
			r.opts.Logger.Info("job stopped: it was cancelled", "job", j.ID)
			return
		case errors.Is(err, errStopped):
			return
		case errors.Is(err, ledger.ErrFenced):
			// Another host claimed the jobs duty: it goes on with the job
			// (and the record in flight), so this host acts on nothing more.
			r.opts.Logger.Warn("job stopped here: the jobs duty moved to another host", "job", j.ID, "error", err)
			if served != nil {
				served.fenced()
			}
			return
		}
		if err != nil && ctx.Err() == nil {
			// The ledger refused a write (a full disk, say): the job stays
			// running in the ledger and goes on at the next start.
			r.opts.Logger.Error("job stopped; it goes on when the host starts again", "job", j.ID, "error", err)
		}
	})
}

// run works through j's records from its cursor at its rate, in batches
// of at most batchSize; every write checks fence. A batch is put in flight,
// by a write, before it is acted on: a host whose duty moved on is refused
// that write, so it does not act. The actions of a batch run at once, so
// their ledger writes share commits (and fsyncs).
//
// The write that puts a batch in flight also carries the progress of the
// batch before it (its cursor and counts), so a batch costs one write of
// the job rather than two. The progress is written on its own only when
// the job waits for its rate or stops: what a reader of the
// job sees never lags by more than one batch, and a batch in flight that
// was acted on is counted by settleInFlight after a crash.
func (r *Runner) run(ctx context.Context, j *ledger.Job, fence ledger.DutyFence) error {
	// As stored now: Serve's look at the ledger may be older than a cancel.
	stored, err := r.Get(ctx, j.ID)
	if err != nil {
		return err
	}
	if stored.State != ledger.JobRunning {
		return errNotRunning
	}
	j = stored
	// A batch is at most a tenth of a second's worth: a slow job still
	// acts on one record at a time, evenly spaced.
	burst := max(1, min(batchSize, int(j.Rate/10)))
	lim := rate.NewLimiter(rate.Limit(j.Rate), burst)
	if err := r.settleInFlight(ctx, j, fence); err != nil {
		return err
	}
	unsaved := false // j holds progress its stored form lacks
	write := func() error {
		unsaved = false
		return r.save(ctx, j, fence)
	}
	defer func() {
		if unsaved && ctx.Err() != nil {
			// Stopped (a cancel, the host stopping) between two batches:
			// the progress of the last is written before the goroutine
			// ends, so a Cancel, which waits for that, writes on top of
			// exact counts. A refusal changes nothing: settleInFlight
			// counts the batch when the job goes on.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.ItemTimeout())
			defer cancel()
			_ = r.save(wctx, j, fence)
		}
	}()
	subs := subscriptionsOf(j.Filter)
	for j.Cursor.Subscription < len(subs) {
		sub := subs[j.Cursor.Subscription]
		var page []*ledger.Record
		var next string
		err := r.opts.Ledger.View(ctx, func(tx ledger.Tx) error {
			var err error
			page, next, err = tx.ListParked(j.Filter.Filter(sub, j.Cursor.After, pageSize))
			return err
		})
		if err != nil {
			return err
		}
		for len(page) > 0 {
			batch := page[:min(burst, len(page))]
			page = page[len(batch):]
			if err := r.pace(ctx, lim, len(batch), func() error {
				if !unsaved {
					return nil
				}
				return write()
			}); err != nil {
				return err
			}
			if why := r.notDeployed(j); why != "" {
				unsaved = false
				return r.stopJob(ctx, j, fence, why)
			}
			j.InFlight = items(batch)
			if err := write(); err != nil {
				return err
			}
			r.actAll(ctx, j, batch)
			if ctx.Err() != nil {
				return ctx.Err() // stopping: the batch stays in flight, settled when the job goes on
			}
			last := batch[len(batch)-1]
			j.InFlight = nil
			j.Cursor.After = ledger.Cursor(last.Subscription, last.AggregateType, last.AggregateID)
			unsaved = true
		}
		switch {
		case next == "":
			j.Cursor = ledger.JobCursor{Subscription: j.Cursor.Subscription + 1}
		default:
			// Past the page (also one the index walk cut short,
			// ledger.MaxScan, with no record in it).
			j.Cursor.After = next
		}
		unsaved = true
	}
	now := r.opts.Clock.Now().UTC()
	j.State, j.Finished = ledger.JobDone, now
	if err := write(); err != nil {
		return err
	}
	r.opts.Logger.Info("job done", "job", j.ID, "action", j.Action, "done", j.Done, "failed", j.Failed,
		"gone", j.Gone, "matched", j.Matched)
	return nil
}

// notDeployed says why a proven job must not act now: its candidate is
// not the module version deployed (its proof holds for those bytes only).
// Empty when it may, or when the job is not proven.
func (r *Runner) notDeployed(j *ledger.Job) string {
	p := j.Filter.Proven
	if p == nil {
		return ""
	}
	var sha string
	ok := false
	if r.opts.Deployed != nil {
		sha, ok = r.opts.Deployed(p.Module)
	}
	switch {
	case !ok:
		return fmt.Sprintf("not-deployed: module %s is no longer deployed, and the job is proven by its version sha256 %s only", p.Module, p.SHA256)
	case !strings.EqualFold(sha, p.SHA256):
		return fmt.Sprintf("not-deployed: module %s is now sha256 %s, and the job is proven by sha256 %s only; deploy it again and start a new job for what is left", p.Module, sha, p.SHA256)
	}
	return ""
}

// stopJob ends j as cancelled by the host itself, saying why, after the
// batches it acted on: what it did stays done.
func (r *Runner) stopJob(ctx context.Context, j *ledger.Job, fence ledger.DutyFence, why string) error {
	j.State, j.Finished, j.Stopped = ledger.JobCancelled, r.opts.Clock.Now().UTC(), why
	if err := r.save(ctx, j, fence); err != nil {
		return err
	}
	r.opts.Logger.Warn("job stopped", "job", j.ID, "why", why, "done", j.Done, "matched", j.Matched)
	return errStopped
}

// errStopped: the host stopped the job itself (stopJob), which is stored.
var errStopped = errors.New("jobs: the job was stopped")

// batchSize bounds the records a job acts on at once. The more at once,
// the more of their writes (and their replays') share each fsync of the
// ledger's single writer: at jobs.max-rate 256 resumed about twice as many
// a second as 64 (docs/BENCHMARKS.md).
const batchSize = 256

func items(recs []*ledger.Record) []ledger.JobItem {
	out := make([]ledger.JobItem, len(recs))
	for i, rec := range recs {
		out[i] = ledger.JobItem{Subscription: rec.Subscription, AggregateType: rec.AggregateType, AggregateID: rec.AggregateID}
	}
	return out
}

// pace waits for the limiter to allow n records, on the runner's clock;
// before it waits it calls before (the job's progress is written then, not
// left unsaved for the wait).
func (r *Runner) pace(ctx context.Context, lim *rate.Limiter, n int, before func() error) error {
	now := r.opts.Clock.Now()
	until := now.Add(lim.ReserveN(now, n).DelayFrom(now))
	if !until.After(now) {
		return nil
	}
	if err := before(); err != nil {
		return err
	}
	return clock.Sleep(ctx, r.opts.Clock, until.Sub(r.opts.Clock.Now()))
}

// actAll acts on every record of a batch at once and counts what came of
// each, in the batch's order.
func (r *Runner) actAll(ctx context.Context, j *ledger.Job, recs []*ledger.Record) {
	errs := make([]error, len(recs))
	var wg sync.WaitGroup
	for i, rec := range recs {
		wg.Go(func() { errs[i] = r.do(ctx, j, rec) })
	}
	wg.Wait()
	for i, rec := range recs {
		r.count(ctx, j, rec, errs[i])
	}
}

// do resumes or skips one record.
func (r *Runner) do(ctx context.Context, j *ledger.Job, rec *ledger.Record) error {
	ictx, cancel := context.WithTimeout(ctx, r.opts.ItemTimeout())
	defer cancel()
	by := subscription.Caller{Actor: "job " + strconv.FormatUint(j.ID, 10) + " (" + j.Actor + ")", Reason: j.Reason}
	if j.Action == ledger.JobResume {
		return r.opts.Engine.Resume(ictx, rec.Subscription, rec.AggregateType, rec.AggregateID, by)
	}
	return r.opts.Engine.Skip(ictx, rec.Subscription, rec.AggregateType, rec.AggregateID, 0, by)
}

// count counts what came of acting on rec.
func (r *Runner) count(ctx context.Context, j *ledger.Job, rec *ledger.Record, err error) {
	switch {
	case err == nil:
		j.Done++
		r.items.done[actionIndex(j.Action)].Add(1)
	case errors.Is(err, subscription.ErrNotParked):
		j.Gone++
		r.items.gone[actionIndex(j.Action)].Add(1)
	case ctx.Err() != nil:
		// Stopping or cancelled: the record is met again when the job goes on.
	default:
		msg := err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			msg = "busy: a long-horizon retry held the aggregate past server.operator-wait; run the job again for it"
		}
		j.AddFailure(ledger.JobFailure{Time: r.opts.Clock.Now().UTC(), Subscription: rec.Subscription,
			AggregateType: rec.AggregateType, AggregateID: rec.AggregateID, Error: msg})
		r.items.failed[actionIndex(j.Action)].Add(1)
	}
}

// cancelledElsewhere reports whether job id is stored as cancelled: a
// Cancel on another host of a shared ledger, which Serve's scan stopped
// this host's goroutine for.
func (r *Runner) cancelledElsewhere(ctx context.Context, id uint64) bool {
	stored, err := r.Get(ctx, id)
	return err == nil && stored.State == ledger.JobCancelled
}

// errNotRunning: the stored job is no longer running, so its goroutine
// stops without writing.
var errNotRunning = errors.New("jobs: the job is no longer running")

// save writes j's progress, unless it was cancelled meanwhile: Cancel
// writes the cancelled job itself, after this goroutine stopped — or, when
// another host of a shared ledger cancelled it, the stored state says so,
// and the write is refused with errNotRunning rather than undo the cancel.
// The write checks fence: ledger.ErrFenced once the jobs duty moved on.
func (r *Runner) save(ctx context.Context, j *ledger.Job, fence ledger.DutyFence) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	j.Updated = r.opts.Clock.Now().UTC()
	err := r.opts.Ledger.Update(ctx, func(tx ledger.Tx) error {
		if err := fence.Check(tx); err != nil {
			return err
		}
		stored, err := tx.Job(j.ID)
		if err != nil {
			return err
		}
		if stored.State != ledger.JobRunning {
			return errNotRunning
		}
		if err := tx.PutJob(j); err != nil {
			return err
		}
		if j.State != ledger.JobRunning {
			return tx.Notify(finished(j, j.Actor))
		}
		return nil
	})
	if err == nil {
		r.notify()
	}
	return err
}

// settleInFlight settles the batch a job was acting on when it stopped (a
// crash, or a host stopping in the middle of it): a record no longer
// parked, or being resumed, was acted on and is counted; one still parked
// as it was was not, and is acted on now — once a write under fence has
// put the batch in flight again, so that a host whose duty moved on does
// not act on it.
func (r *Runner) settleInFlight(ctx context.Context, j *ledger.Job, fence ledger.DutyFence) error {
	if j.InFlightOne != nil {
		j.InFlight, j.InFlightOne = append(j.InFlight, *j.InFlightOne), nil
	}
	if len(j.InFlight) == 0 {
		return nil
	}
	var todo []*ledger.Record
	err := r.opts.Ledger.View(ctx, func(tx ledger.Tx) error {
		todo = nil
		for _, it := range j.InFlight {
			rec, err := tx.Parked(it.Subscription, it.AggregateType, it.AggregateID)
			switch {
			case errors.Is(err, ledger.ErrNotFound) || (err == nil && rec.State == ledger.StateResuming):
			case err != nil:
				return err
			default:
				todo = append(todo, rec)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if why := r.notDeployed(j); why != "" && len(todo) > 0 {
		// Those acted on before the stop are done; the rest stay parked.
		j.Done += len(j.InFlight) - len(todo)
		j.InFlight = nil
		return r.stopJob(ctx, j, fence, why)
	}
	if len(todo) > 0 {
		if fence.Fenced() {
			if err := r.save(ctx, j, fence); err != nil {
				return err
			}
		}
		r.actAll(ctx, j, todo)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	j.Done += len(j.InFlight) - len(todo) // acted on before the stop
	last := j.InFlight[len(j.InFlight)-1]
	j.InFlight = nil
	j.Cursor.After = ledger.Cursor(last.Subscription, last.AggregateType, last.AggregateID)
	return r.save(ctx, j, fence)
}

// finished is the "job-finished" notification of j, written in the
// transaction that ends it: how it ended, by whom, and its counts. It names
// the job's subscription when its filter names one only, so a webhook
// filtered to that subscription hears of it.
func finished(j *ledger.Job, actor string) ledger.Notification {
	n := ledger.Notification{Type: ledger.NotifyJobFinished, Time: j.Finished, Job: strconv.FormatUint(j.ID, 10),
		JobState: string(j.State), Actor: actor,
		Reason: fmt.Sprintf("%s: %d done, %d failed, %d no longer parked, of %d matched", j.Action, j.Done, j.Failed, j.Gone, j.Matched)}
	if j.Stopped != "" {
		n.Reason += "; stopped by the host: " + j.Stopped
	}
	if len(j.Filter.Subscriptions) == 1 {
		n.Subscription = j.Filter.Subscriptions[0]
	}
	return n
}
