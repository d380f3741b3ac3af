package cluster

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/jsapi"
	"github.com/nats-io/nats.go/jetstream"
)

// lease is this host's membership: its key in the bucket, created and then
// renewed by compare-and-set on the key's revision, and the term it grants.
//
// A term is the span in which this host may work on partitions. It starts
// with a write of the key (Create or Update) and is extended by each later
// one; it ends at sent + TTL - Margin, where sent is this host's clock when
// it sent the earliest request the confirmed write may have been — unless
// a newer write extends it first — or at once when the key turns out to be
// gone (expired, or another incarnation's). Its context is cancelled when it
// ends, which is how the Cluster learns to give up.
//
// An Update names the revision it replaces, so a successful one proves the
// key never expired since that revision: an expiry writes a marker, and the
// marker's revision would fail it. That unbroken chain of revisions is what
// lets a term be extended rather than started anew.
//
// The engine is fenced by the term the Cluster's loop adopted (adopt), the
// one its partitions were given in: each confirmed write extending that
// term tells the engine the term's new end (Engine.SetLease); a new term is
// told only once the loop has given the old one up and adopts it, so runs
// started in an ended term never act again, even when the next one begins
// before they are stopped.
type lease struct {
	kv    jetstream.KeyValue
	key   string
	ttl   time.Duration
	gap   time.Duration // how long before the server's expiry a term ends
	clock clock.Clock
	stats *counters
	renew time.Duration
	try   time.Duration // how long a renewal may take before it counts as failed
	retry time.Duration
	inUse time.Duration // how soon to try joining again while another incarnation holds the key
	// resume is Options.Resume; joined is Options.Joined. resumed counts
	// the keys taken over from a previous run (for the log).
	resume  string
	joined  func(incarnation string)
	resumed int
	// unsure is the incarnation of a join whose create got no answer (a
	// NATS timeout): it may have landed, so the next join may take the
	// key over from it as from resume.
	unsure string

	// fence is Engine.SetLease for a host's membership (a duty's lease
	// fences nothing); reconnect, if set, moves the NATS connection to
	// another server (see run).
	fence     func(until time.Time)
	reconnect func(cause error)
	// others, if set, reports whether another host is a live member, one
	// that could take what this host gives up (see stayOut); unset, the
	// host is taken to be alone and never holds itself out.
	others  func(ctx context.Context) bool
	out     atomic.Bool   // holding itself out now (read by the Cluster's loop)
	nudge   chan struct{} // renew now (buffer 1)
	changed chan struct{} // a write was confirmed or a term ended (buffer 1)

	// Owned by the goroutine running run (and Open before it starts).
	rev     uint64    // revision of the last confirmed write; 0: not a member
	pending time.Time // send time of the earliest unconfirmed write; zero if none

	mu       sync.Mutex
	info     memberInfo
	term     context.Context // nil: no term
	end      context.CancelFunc
	deadline clock.Timer
	ended    []time.Time     // when terms ended, within the last rejoinWindow
	until    time.Time       // the current term's end
	adopted  context.Context // the term the engine is fenced by; nil: none
	renewed  time.Time       // clock time of the last confirmed write
}

// newLease returns the lease of key in kv (a host's membership: its id),
// not yet joined; inUse is how soon run tries to join again while the key
// is another incarnation's.
func newLease(kv jetstream.KeyValue, key string, o *Options, info memberInfo, stats *counters, inUse time.Duration) *lease {
	return &lease{
		kv: kv, key: key, ttl: o.LeaseTTL, gap: o.Margin, clock: o.Clock, stats: stats,
		renew: o.renewEvery(), try: o.renewTimeout(), retry: o.retryEvery(), inUse: inUse,
		nudge: make(chan struct{}, 1), changed: make(chan struct{}, 1),
		info: info, resume: o.Resume, joined: o.Joined, fence: func(time.Time) {},
	}
}

// errInUse means the host's key exists under another incarnation.
var errInUse = errors.New("cluster: host id in use")

// join creates the key as a new incarnation and starts a term.
func (l *lease) join(ctx context.Context) error {
	l.mu.Lock()
	l.info.Incarnation = rand.Text()
	value := l.info.encode()
	l.mu.Unlock()
	sent := l.clock.Now()
	actx, cancel := context.WithTimeout(ctx, l.renew)
	defer cancel()
	rev, err := l.kv.Create(actx, l.key, value)
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		if rev, err = l.takeOver(actx, value); err != nil {
			return err
		}
	case err != nil:
		if jsapi.Transient(err) {
			l.mu.Lock()
			l.unsure = l.info.Incarnation
			l.mu.Unlock()
		}
		return fmt.Errorf("cluster: join as %q: %w", l.key, err)
	}
	l.mu.Lock()
	l.unsure = ""
	l.mu.Unlock()
	l.rev = rev
	l.confirmed(sent)
	if l.joined != nil {
		l.joined(l.info.Incarnation)
	}
	return nil
}

// takeOver writes value over the key when it is held by the previous run
// of this host (Options.Resume), which is over; errInUse otherwise.
func (l *lease) takeOver(ctx context.Context, value []byte) (uint64, error) {
	inUse := fmt.Errorf("%w: %q is a live member (another host with this id, or this host's previous run, whose lease ends within %v)",
		errInUse, l.key, l.ttl)
	l.mu.Lock()
	unsure := l.unsure
	l.mu.Unlock()
	if l.resume == "" && unsure == "" {
		return 0, inUse
	}
	e, err := l.kv.Get(ctx, l.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, inUse // gone meanwhile: the next try creates it
	}
	if err != nil {
		return 0, fmt.Errorf("cluster: join as %q: %w", l.key, err)
	}
	if m, derr := decodeMember(e.Value()); derr != nil || m.Incarnation == "" ||
		(m.Incarnation != l.resume && m.Incarnation != unsure) {
		return 0, inUse
	}
	rev, err := l.kv.Update(ctx, l.key, value, e.Revision())
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, inUse // written meanwhile: no longer the previous run's
	}
	if err != nil {
		return 0, fmt.Errorf("cluster: take over %q from this host's previous run: %w", l.key, err)
	}
	l.resumed++
	return rev, nil
}

// renewOnce writes the key over the last confirmed revision. A revision
// mismatch is either this host's own earlier attempt that landed though its
// ack was lost (the key holds this incarnation at a later revision: keep
// going from there) or the key expired or was taken (the term ends, and run
// joins anew).
//
// The read that tells them apart may be answered by a node cut off from the
// majority (a direct get is served by any replica, and a leader that lost
// its quorum answers until it notices), which shows the last revision this
// host confirmed: that proves nothing new, so only a later revision of this
// incarnation counts. A revision is stored only once a majority agreed to
// it, and only this incarnation writes its value, so such a revision is one
// of its own writes since the last confirmed one, sent no earlier than
// pending. Anything else is neither renewed nor lost: the attempt failed,
// and the term runs out on its own clock unless a later attempt is
// confirmed.
func (l *lease) renewOnce(ctx context.Context) error {
	sent := l.clock.Now()
	if l.pending.IsZero() {
		l.pending = sent
	}
	l.mu.Lock()
	value, inc := l.info.encode(), l.info.Incarnation
	l.mu.Unlock()
	actx, cancel := context.WithTimeout(ctx, l.try)
	defer cancel()
	rev, err := l.kv.Update(actx, l.key, value, l.rev)
	if err == nil {
		l.rev = rev
		l.confirmed(l.pending)
		return nil
	}
	if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return fmt.Errorf("cluster: renew %q: %w", l.key, err)
	}
	e, gerr := l.kv.Get(actx, l.key)
	switch {
	case gerr == nil:
		if m, derr := decodeMember(e.Value()); derr == nil && m.Incarnation == inc {
			if e.Revision() <= l.rev {
				l.stats.staleReads.Add(1)
				return fmt.Errorf("cluster: renew %q: revision %d did not take, and the key reads as revision %d: a node behind the majority answered",
					l.key, l.rev, e.Revision())
			}
			l.rev = e.Revision()
			l.confirmed(l.pending)
			return nil
		}
	case !errors.Is(gerr, jetstream.ErrKeyNotFound) && !errors.Is(gerr, jetstream.ErrKeyDeleted):
		return fmt.Errorf("cluster: renew %q: %w", l.key, gerr)
	}
	l.rev, l.pending = 0, time.Time{}
	l.stats.leasesLost.Add(1)
	l.endTerm()
	return fmt.Errorf("cluster: lease of %q lost: the key expired or was replaced", l.key)
}

// confirmed extends the term to sent + TTL - Margin, or starts one.
func (l *lease) confirmed(sent time.Time) {
	l.pending = time.Time{}
	l.stats.renewals.Add(1)
	now := l.clock.Now()
	until := sent.Add(l.ttl - l.gap)
	left := until.Sub(now)
	l.mu.Lock()
	l.renewed = now
	if left <= 0 { // the write took so long that its lease is as good as gone
		l.mu.Unlock()
		return
	}
	if l.term == nil || l.deadline == nil || !l.deadline.Stop() {
		// No term, or its deadline fired just now: a new term, since the
		// Cluster may already be giving the old one up.
		l.term, l.end = context.WithCancel(context.Background())
	}
	end := l.end
	l.until = until
	term := l.term
	l.deadline = l.clock.AfterFunc(left, func() { l.expire(term, end) })
	if l.adopted != nil && l.adopted == l.term {
		l.fence(until)
	}
	l.mu.Unlock()
	l.signal()
}

// adopt fences the engine by term, the Cluster's loop's current one, once
// it gave up the one before: the engine may act until term's end. A term
// that has ended meanwhile is not adopted (the loop gives it up next).
func (l *lease) adopt(term context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if term != l.term || term.Err() != nil {
		return
	}
	l.adopted = term
	l.fence(l.until)
}

// valid reports whether the engine may act now: an adopted term whose end
// has not come.
func (l *lease) valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.adopted != nil && l.adopted == l.term && l.clock.Now().Before(l.until)
}

// expire ends term, whose cancel is end, at its deadline.
func (l *lease) expire(term context.Context, end context.CancelFunc) {
	l.mu.Lock()
	if term.Err() == nil {
		l.ended = append(l.ended, l.clock.Now())
	}
	l.mu.Unlock()
	end()
	l.signal()
}

// endTerm ends the current term at once.
func (l *lease) endTerm() {
	l.mu.Lock()
	if l.term != nil && l.term.Err() == nil {
		l.ended = append(l.ended, l.clock.Now())
	}
	l.adopted = nil
	l.fence(l.clock.Now())
	if l.deadline != nil {
		l.deadline.Stop()
	}
	if l.end != nil {
		l.end()
	}
	l.term, l.end, l.deadline = nil, nil, nil
	l.mu.Unlock()
	l.signal()
}

// current returns the current term's context, nil if there is none or it
// has ended.
func (l *lease) current() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.term == nil || l.term.Err() != nil {
		return nil
	}
	return l.term
}

// lastRenewed returns the clock time of the last confirmed write.
func (l *lease) lastRenewed() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed
}

// released records the count of released partitions and renews at once, so
// that the others' watchers see the change and claim them now.
func (l *lease) released(n uint64) {
	l.mu.Lock()
	l.info.Releases = n
	l.mu.Unlock()
	l.kick()
}

// kick makes run renew now rather than at its next tick.
func (l *lease) kick() {
	select {
	case l.nudge <- struct{}{}:
	default:
	}
}

func (l *lease) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// A flapping link can end the lease's terms again and again; each end
// makes the host give its partitions up, and each new term claims them
// back, moving them twice. After more than maxRejoins terms ended within
// rejoinWindow the host stays out — it stops renewing (its key expires)
// or does not join — until it would be maxRejoins again, its partitions
// with the others meanwhile: at most maxRejoins give-ups and reclaims a
// minute, and the first.
//
// Staying out makes sense only while another host takes the partitions:
// a host holds itself out only while another host is a live member
// (others). A host that holds itself out stops renewing, so its key is gone
// from the server within the margin of its term's end, and it counts for
// no one: a lone host, or every host of the deployment after a fault that
// ended all their terms (the bucket's leader lost again and again), joins
// again at once — all of them together, not the lowest id first. That
// cannot thrash: a host with a term is never held out, so hosts that
// rejoined do not push each other out, and rendezvous hashing over the
// same hosts gives each its own partitions back, where one host first
// would take every partition and hand most of them back as the others
// came. While holding out it asks again every renewal period, and at once
// when the Cluster sees another member's key go.
const (
	maxRejoins   = 3
	rejoinWindow = time.Minute
)

// holdDown returns how long to stay out before starting a new term (0:
// not at all), and forgets ended terms older than rejoinWindow.
func (l *lease) holdDown(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.ended) > 0 && now.Sub(l.ended[0]) >= rejoinWindow {
		l.ended = l.ended[1:]
	}
	if len(l.ended) <= maxRejoins {
		return 0
	}
	return l.ended[len(l.ended)-maxRejoins-1].Add(rejoinWindow).Sub(now)
}

// stayOut reports whether run should make no attempt now, and for how
// long: while too many terms ended lately (holdDown), no term is under way
// and another host is a live member, the host neither joins nor renews a
// key whose term ended.
func (l *lease) stayOut(ctx context.Context) (time.Duration, bool) {
	hold := l.holdDown(l.clock.Now())
	if hold <= 0 || (l.rev != 0 && l.current() != nil) || !l.othersLive(ctx) {
		l.out.Store(false)
		return 0, false
	}
	if !l.out.Swap(true) {
		l.stats.holdDowns.Add(1)
	}
	// Not renewed any more, the key expires within a TTL, and the others
	// claim what this host gave up.
	l.rev, l.pending = 0, time.Time{}
	return min(hold, l.renew), true
}

// othersLive asks others, within a renewal's time.
func (l *lease) othersLive(ctx context.Context) bool {
	if l.others == nil {
		return false
	}
	actx, cancel := context.WithTimeout(ctx, l.try)
	defer cancel()
	return l.others(actx)
}

// run renews the lease every TTL/3 (a failed attempt again after a short
// wait, or at once when kicked) and joins anew once it was lost, until ctx
// ends. Open has joined before it starts. It is the lease's schedule — a
// renewal is due every TTL/3 whether the last one failed or not — rather
// than a request asked again until answered, so it keeps its own timer
// instead of jsapi.Retry.
//
// Once renewals have failed for a sixth of the TTL since the first failed
// one was sent — at the first one's timeout, then, for a renewal may take
// a sixth (try) — it has the connection move to another NATS server
// (reconnect), at most once per third, and renews again at once: the
// server it is on may be cut off from the majority while it still answers
// this host's pings, and no renewal can succeed through it. The budget is
// tight: a renewal sent a third after the last confirmed one has TTL -
// Margin - TTL/3 (TTL/2 by default) left of the term to time out, move
// and be confirmed on another server; a timeout of a third would leave a
// tenth of the TTL, which a loaded host overran.
func (l *lease) run(ctx context.Context) {
	wait := l.renew
	var failing, moved time.Time // since when renewals fail; the last move
	for {
		t := l.clock.NewTimer(wait)
		select {
		case <-t.C():
		case <-l.nudge:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return
		}
		var err error
		if hold, out := l.stayOut(ctx); out {
			wait = hold
			continue
		}
		sent := l.clock.Now()
		if l.rev == 0 {
			err = l.join(ctx)
		} else {
			err = l.renewOnce(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		now := l.clock.Now()
		switch {
		case err == nil:
			wait, failing = l.renew, time.Time{}
		case errors.Is(err, errInUse): // held, not failed: a duty another host has
			wait, failing = l.inUse, time.Time{}
		default:
			l.stats.renewalFailures.Add(1)
			wait = l.retry
			if failing.IsZero() {
				failing = sent // an attempt may fail only at its timeout
			}
			if l.reconnect != nil && now.Sub(failing) >= l.try && now.Sub(moved) >= l.renew {
				moved, wait = now, 0
				l.stats.reconnects.Add(1)
				l.reconnect(err)
			}
		}
	}
}

// leave deletes the key if it still holds the last confirmed revision, so
// the others see this host go at once rather than after its TTL. Call it
// only after run has returned.
func (l *lease) leave(ctx context.Context) error {
	l.endTerm()
	if l.rev == 0 {
		return nil
	}
	rev := l.rev
	l.rev = 0
	err := l.kv.Delete(ctx, l.key, jetstream.LastRevision(rev))
	// A renewal cut short by the stop may have landed unconfirmed: delete
	// that one if it is this incarnation's, never another's. The read may
	// come from a server behind the others (an older revision), so it is
	// asked again a few times.
	for try := 0; try < 4 && errors.Is(err, jetstream.ErrKeyRevisionMismatch); try++ {
		e, gerr := l.kv.Get(ctx, l.key)
		if gerr != nil {
			return nil // gone already
		}
		if m, derr := decodeMember(e.Value()); derr != nil || m.Incarnation != l.info.Incarnation {
			return nil
		}
		err = l.kv.Delete(ctx, l.key, jetstream.LastRevision(e.Revision()))
	}
	if err != nil {
		return fmt.Errorf("cluster: leave as %q: %w", l.key, err)
	}
	return nil
}
