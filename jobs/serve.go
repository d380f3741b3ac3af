package jobs

import (
	"context"
	"time"

	"github.com/berthhq/berth/ledger"
)

// Serve runs the jobs of a shared ledger (Options.Shared) until ctx ends or
// the runner closes, then stops them and returns once their goroutines did:
// the host that holds the cluster's jobs duty calls it for as long as it
// holds it, with the duty's claim as fence. It starts every running job the
// ledger holds — left by an earlier holder, or created on any host — and
// looks again every PollInterval (at once after a Create on this host),
// starting the new ones and stopping those cancelled elsewhere. A job goes
// on from its stored progress, settling the record an earlier holder had
// in flight.
//
// Every write of the jobs' progress checks fence, the record in flight
// before it is acted on included: once another host claimed the duty,
// the ledger refuses them (ledger.ErrFenced), the job acts on nothing more,
// and Serve stops early. The zero fence fences nothing.
func (r *Runner) Serve(ctx context.Context, fence ledger.DutyFence) {
	sctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	served := &serving{fence: fence, fenced: cancel}
	defer served.wg.Wait()
	for sctx.Err() == nil {
		if err := r.scan(sctx, served); err != nil && sctx.Err() == nil {
			r.opts.Logger.Warn("jobs: reading the jobs failed; looking again", "error", err)
		}
		poll, stopPoll := r.after(r.opts.PollInterval)
		select {
		case <-poll:
		case <-r.created:
		case <-sctx.Done():
		}
		stopPoll()
	}
}

// scan starts the running jobs without a goroutine here, and stops the
// goroutines of jobs no longer running in the ledger.
func (r *Runner) scan(ctx context.Context, served *serving) error {
	jobs, err := r.all(ctx)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		r.mu.Lock()
		cancel, has := r.running[j.ID]
		r.mu.Unlock()
		switch {
		case j.State == ledger.JobRunning && !has:
			r.opts.Logger.Info("job goes on here", "job", j.ID, "action", j.Action, "done", j.Done, "matched", j.Matched)
			r.start(ctx, j, served) // unless a Cancel began meanwhile
		case j.State != ledger.JobRunning && has:
			cancel() // its state is final; the goroutine writes nothing more
		}
	}
	return nil
}

// after returns a channel closed d from now on the runner's clock, and a
// stop. An AfterFunc, not a NewTimer: a clock.Fake counts NewTimer timers as
// waiters, which tests count to know a job is pacing.
func (r *Runner) after(d time.Duration) (<-chan struct{}, func() bool) {
	ch := make(chan struct{})
	t := r.opts.Clock.AfterFunc(d, func() { close(ch) })
	return ch, t.Stop
}
