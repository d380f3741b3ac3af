package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/subscription"
	"github.com/nats-io/nats.go/micro"
)

// holdKey is one reset's hold of one subscription.
type holdKey struct{ sub, id string }

// serve starts the berth_ops micro service: endpoint "host" on
// S_OPS.<host-id> for the calls aimed at this host, "all" on S_OPS.all (no
// queue group: every host gets each) for the broadcasts. A call to this
// host runs on a goroutine of its own (a resume may wait for a busy
// aggregate); broadcasts run in the order sent, so a reset's unhold never
// overtakes its hold.
func (f *Forwarder) serve() error {
	svc, err := micro.AddService(f.nc, micro.Config{Name: serviceName, Version: "1.0.0",
		Description: "Berth operator calls between the hosts of a deployment",
		Metadata:    map[string]string{"host": f.c.Host(), "deployment": f.opts.Deployment}})
	if err != nil {
		return fmt.Errorf("cluster: operator service: %w", err)
	}
	one := micro.HandlerFunc(func(r micro.Request) {
		if f.begin(r) {
			go func() {
				defer f.wg.Done()
				f.answer(r)
			}()
		}
	})
	all := micro.HandlerFunc(func(r micro.Request) {
		if r.Headers().Get(headerFrom) == f.c.Host() {
			return // the caller acted here itself
		}
		if f.begin(r) {
			defer f.wg.Done()
			f.answer(r)
		}
	})
	if err := svc.AddEndpoint("host", one, micro.WithEndpointSubject(f.subj+f.c.Host())); err != nil {
		_ = svc.Stop()
		return fmt.Errorf("cluster: operator service: %w", err)
	}
	if err := svc.AddEndpoint("all", all, micro.WithEndpointSubject(f.subj+opsAll), micro.WithEndpointQueueGroupDisabled()); err != nil {
		_ = svc.Stop()
		return fmt.Errorf("cluster: operator service: %w", err)
	}
	f.svc = svc
	return nil
}

// begin counts a call in, or answers it ErrClosed (which the caller
// retries: the host's partitions move) once Close began.
func (f *Forwarder) begin(r micro.Request) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		_ = r.Error(codeOf(subscription.ErrClosed), fmt.Sprintf("host %s is closing: %v", f.c.Host(), subscription.ErrClosed), nil,
			micro.WithHeaders(micro.Headers{headerHost: {f.c.Host()}}))
		return false
	}
	f.wg.Add(1)
	return true
}

// answer runs one call on this host's engine and answers it: empty for
// done, else the error's code and message.
func (f *Forwarder) answer(r micro.Request) {
	hdr := micro.WithHeaders(micro.Headers{headerHost: {f.c.Host()}})
	var c opCall
	if err := json.Unmarshal(r.Data(), &c); err != nil {
		_ = r.Error("error", "unreadable operator call: "+err.Error(), nil, hdr)
		return
	}
	ctx, cancel := context.WithTimeout(f.ctx, c.wait())
	defer cancel()
	if err := f.apply(ctx, c); err != nil {
		_ = r.Error(codeOf(err), err.Error(), nil, hdr)
		return
	}
	_ = r.Respond(nil, hdr)
}

// apply runs a call another host made here: on this host's engine only,
// never forwarded again.
func (f *Forwarder) apply(ctx context.Context, c opCall) error {
	switch c.Op {
	case opResume:
		return f.eng.Resume(ctx, c.Subscription, c.AggregateType, c.AggregateID, subscription.Caller{Actor: c.Actor, Reason: c.Reason})
	case opSkip:
		return f.eng.Skip(ctx, c.Subscription, c.AggregateType, c.AggregateID, c.Through, subscription.Caller{Actor: c.Actor, Reason: c.Reason})
	case opRefreshPause:
		return f.eng.RefreshPause(ctx, c.Subscription)
	case opHold:
		return f.hold(ctx, holdKey{c.Subscription, c.Hold}, c)
	case opUnhold:
		return f.unhold(ctx, holdKey{c.Subscription, c.Hold}, "lifted")
	}
	return fmt.Errorf("unknown operator call %q", c.Op)
}

// hold holds the subscription for another host's reset, for as long as the
// call says unless that host lifts it sooner.
func (f *Forwarder) hold(ctx context.Context, k holdKey, c opCall) error {
	if c.Hold == "" || c.wait() <= 0 {
		return errors.New("a hold needs an id and a duration")
	}
	if err := f.eng.Hold(ctx, k.sub, k.id); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.holds[k]; t != nil {
		t.Stop()
	}
	f.holds[k] = f.opts.Clock.AfterFunc(c.wait(), func() { f.unholdLater(k) })
	return nil
}

// unhold lifts a hold another host's reset put on this one.
func (f *Forwarder) unhold(ctx context.Context, k holdKey, why string) error {
	if why == "expired" {
		f.opts.Logger.Warn("a reset's hold expired before the host resetting lifted it; going on", "subscription", k.sub, "hold", k.id)
	}
	// The run starts from the checkpoints it reads in an Update that writes
	// nothing, which catches this host's cache up to the reset's commit on
	// its own; this empty View is a probe first: a ledger that cannot be
	// reached now keeps the hold, tried again every second, rather than
	// starting a run whose first read would fail.
	if err := f.c.opts.Ledger.View(ctx, func(ledger.Tx) error { return nil }); err != nil {
		f.mu.Lock()
		if t := f.holds[k]; t != nil {
			t.Stop()
		}
		f.holds[k] = f.opts.Clock.AfterFunc(time.Second, func() { f.unholdLater(k) })
		f.mu.Unlock()
		return fmt.Errorf("cluster: catching up with the ledger before the run starts again (tried again in a second): %w", err)
	}
	f.dropHold(k)
	return f.eng.Unhold(ctx, k.sub, k.id)
}

// unholdLater is unhold from a timer: a hold that expired, or a lift that
// could not catch up with the ledger.
func (f *Forwarder) unholdLater(k holdKey) {
	f.mu.Lock()
	closing := f.closing
	f.mu.Unlock()
	if closing {
		return // Close lifts it
	}
	if err := f.unhold(f.ctx, k, "expired"); err != nil {
		f.opts.Logger.Error("reset hold: starting the subscription again failed", "subscription", k.sub, "err", err)
	}
}

// dropHold forgets a hold and stops its timer.
func (f *Forwarder) dropHold(k holdKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.holds[k]; t != nil {
		t.Stop()
	}
	delete(f.holds, k)
}

// Close stops answering the other hosts (calls being answered end). Holds
// that other hosts' resets put on this one stay: the host is shutting down
// — its engine closes next, and a held subscription writes nothing more —
// whereas a run started now could write checkpoints from before a reset
// over it.
func (f *Forwarder) Close() error {
	err := f.svc.Stop()
	// Once the server has the unsubscribe, nobody's call reaches this host
	// any more: a caller finds no responder and looks for the owner again.
	err = errors.Join(err, f.nc.Flush())
	f.mu.Lock()
	f.closing = true
	f.mu.Unlock()
	f.cancel() // a call waiting for a busy aggregate ends now
	f.wg.Wait()
	f.mu.Lock()
	for k, t := range f.holds {
		t.Stop()
		delete(f.holds, k)
	}
	f.mu.Unlock()
	return err
}
