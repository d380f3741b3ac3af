package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/ledger"
)

// dutyLog records when each host's work of a duty ran.
type dutyLog struct {
	mu    sync.Mutex
	spans []interval // end zero: running
}

// work returns host's DutyFunc: it runs until its context ends, noting
// both times on now, and its claim's epoch.
func (l *dutyLog) work(host string, now func() time.Time) DutyFunc {
	return func(ctx context.Context, fence ledger.DutyFence) {
		l.mu.Lock()
		l.spans = append(l.spans, interval{host: host, start: now(), epoch: fence.Epoch})
		i := len(l.spans) - 1
		l.mu.Unlock()
		<-ctx.Done()
		l.mu.Lock()
		l.spans[i].end = now()
		l.mu.Unlock()
	}
}

// running returns the hosts whose work runs now.
func (l *dutyLog) running() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.spans {
		if s.end.IsZero() {
			out = append(out, s.host)
		}
	}
	return out
}

// oneRunning says who runs the duty until exactly one host does, and it
// is not the host named not (if any); nil then.
func oneRunning(l *dutyLog, not string) error {
	if r := l.running(); len(r) != 1 || r[0] == not {
		return fmt.Errorf("the duty running on %v, want one host other than %q", r, not)
	}
	return nil
}

// last returns the latest span of host, false if none.
func (l *dutyLog) last(host string) (interval, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.spans) - 1; i >= 0; i-- {
		if l.spans[i].host == host {
			return l.spans[i], true
		}
	}
	return interval{}, false
}

// assertSerial fails unless each span ended before the next one started,
// at a later epoch: never two hosts at the duty at once, and each term's
// claim fences the ones before.
func (l *dutyLog) assertSerial(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	spans := slices.Clone(l.spans)
	slices.SortFunc(spans, func(a, b interval) int { return a.start.Compare(b.start) })
	for i := 1; i < len(spans); i++ {
		if prev := spans[i-1]; prev.end.IsZero() || prev.end.After(spans[i].start) {
			t.Fatalf("%s did the duty from %v to %v, %s started at %v", prev.host, prev.start, prev.end, spans[i].host, spans[i].start)
		}
		if prev := spans[i-1]; spans[i].epoch <= prev.epoch {
			t.Fatalf("%s did the duty at epoch %d after %s at %d", spans[i].host, spans[i].epoch, prev.host, prev.epoch)
		}
	}
}

// dutyHosts starts a host per id on n, each standing for duty "jobs", and
// waits until one of them holds it; it returns the hosts, their duties and
// the holder's index.
func dutyHosts(t *testing.T, n *natstest.Node, ttl time.Duration, log *dutyLog, ids ...string) ([]*host, []*Duty, int) {
	t.Helper()
	st := openLedger(t)
	var hosts []*host
	var duties []*Duty
	for _, id := range ids {
		h := startHost(t, n.URL(), id, st, Options{LeaseTTL: ttl})
		d, err := h.c.Duty(t.Context(), "jobs", log.work(id, time.Now))
		if err != nil {
			t.Fatal(err)
		}
		hosts, duties = append(hosts, h), append(duties, d)
	}
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error { return oneRunning(log, "") })
	holder := slices.Index(ids, log.running()[0])
	return hosts, duties, holder
}

// TestDutyOneHolder: of three hosts standing for a duty, exactly one does
// it, the server names it as the holder, and the duty's key is not taken
// for a member.
func TestDutyOneHolder(t *testing.T) {
	var log dutyLog
	hosts, duties, holder := dutyHosts(t, natstest.RunServer(t), 10*time.Second, &log, "h1", "h2", "h3")
	for i, d := range duties {
		if d.Held() != (i == holder) {
			t.Errorf("%s: Held() = %v, holder is %s", hosts[i].id, d.Held(), hosts[holder].id)
		}
		host, addr, err := d.Holder(t.Context())
		if err != nil || host != hosts[holder].id || addr != "http://"+host+":8080" {
			t.Errorf("%s: Holder() = %q, %q, %v", hosts[i].id, host, addr, err)
		}
	}
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
		for _, h := range hosts {
			if ms := h.c.Members(); len(ms) != 3 {
				return fmt.Errorf("%s sees %d members, want 3: %+v", h.id, len(ms), ms)
			}
		}
		return nil
	})
	for _, m := range hosts[0].c.Members() {
		if m.Host != "h1" && m.Host != "h2" && m.Host != "h3" {
			t.Fatalf("a member %+v", m)
		}
	}
	if got := log.running(); len(got) != 1 {
		t.Fatalf("running: %v", got)
	}
	if ds := hosts[1].c.Duties(); len(ds) != 1 || ds[0] != duties[1] || ds[0].Name() != "jobs" {
		t.Fatalf("Duties() = %v", ds)
	}
	if _, err := hosts[0].c.Duty(t.Context(), "jobs", log.work("h1", time.Now)); !errors.Is(err, errOptions) {
		t.Fatalf("a duty twice: %v", err)
	}
	for _, name := range []string{"", "a.b", "a:b"} {
		if _, err := hosts[0].c.Duty(t.Context(), name, log.work("h1", time.Now)); !errors.Is(err, errOptions) {
			t.Fatalf("duty %q: %v", name, err)
		}
	}
}

// TestDutyHandoverOnClose: a holder that closes stops the work, deletes the
// key, and another host takes the duty at once — well within a renewal
// interval, so not by the key running out or by polling — and the host
// that closed stands for it no more.
func TestDutyHandoverOnClose(t *testing.T) {
	var log dutyLog
	hosts, duties, holder := dutyHosts(t, natstest.RunServer(t), 10*time.Second, &log, "h1", "h2", "h3")
	closed := time.Now()
	if err := hosts[holder].c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if span, _ := log.last(hosts[holder].id); span.end.IsZero() || duties[holder].Held() {
		t.Fatalf("the closed host still does the duty: %+v", span)
	}
	checkfor.Nil(t, 2*time.Second, 5*time.Millisecond, func() error { return oneRunning(&log, "") })
	next := log.running()[0]
	if next == hosts[holder].id {
		t.Fatalf("the closed host took the duty again")
	}
	if span, _ := log.last(next); span.start.Sub(closed) > 10*time.Second/3 {
		t.Fatalf("taken over %v after the close", span.start.Sub(closed))
	}
	log.assertSerial(t)
}

// TestDutyTakeoverAfterAbandon: a holder whose renewals stop (its NATS
// connection closed, as a kill or a network cut leaves it) stops the work
// on its own clock, and another host takes the duty within 2x TTL of the
// cut — after the holder stopped.
func TestDutyTakeoverAfterAbandon(t *testing.T) {
	const ttl = 2 * time.Second
	var log dutyLog
	hosts, duties, holder := dutyHosts(t, natstest.RunServer(t), ttl, &log, "h1", "h2")
	cut := time.Now()
	hosts[holder].nc.Close()
	checkfor.Nil(t, 2*ttl, 5*time.Millisecond, func() error { return oneRunning(&log, hosts[holder].id) })
	if took := time.Since(cut); took > 2*ttl {
		t.Fatalf("taken over %v after the cut, more than 2x TTL", took)
	}
	span, _ := log.last(hosts[holder].id)
	if span.end.Before(cut) || duties[holder].Held() {
		t.Fatalf("the abandoned holder's work: %+v (cut at %v)", span, cut)
	}
	log.assertSerial(t)
}

// TestDutyGiveUpAtDeadline: a holder that cannot renew does the duty until
// TTL - Margin (8 s of 10) after it sent its last confirmed write, by its
// own clock, and not a moment longer.
func TestDutyGiveUpAtDeadline(t *testing.T) {
	n := natstest.RunServer(t)
	clock := clock.NewFake(start)
	var log dutyLog
	h := startHost(t, n.URL(), "solo", openLedger(t), Options{LeaseTTL: 10 * time.Second, Clock: clock})
	d, err := h.c.Duty(t.Context(), "jobs", log.work("solo", clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error { return oneRunning(&log, "") })
	// Both leases (membership and duty) wait for their next renewal.
	if err := clock.BlockUntil(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	h.nc.Close() // every renewal fails from now on
	clock.Advance(8*time.Second - time.Millisecond)
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
		if d.stats.renewalFailures.Load() < 1 {
			return fmt.Errorf("no failed renewal of the duty yet, %d renewals", d.stats.renewals.Load())
		}
		return nil
	})
	if !d.Held() || len(log.running()) != 1 {
		t.Fatalf("gave the duty up before the deadline")
	}
	clock.Advance(time.Millisecond)
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
		if r := log.running(); len(r) != 0 || d.Held() {
			return fmt.Errorf("the work still running on %v, held %v", r, d.Held())
		}
		return nil
	})
	if span, _ := log.last("solo"); !span.end.Equal(start.Add(8 * time.Second)) {
		t.Fatalf("stopped at %v, want the deadline %v", span.end, start.Add(8*time.Second))
	}
}

// TestDutyFencesTheOldHolder: each term's work runs under a claim in the
// ledger at the epoch after the last; once another host took the duty
// over, a write checked with the old holder's claim is refused with
// ledger.ErrFenced and the new holder's goes through.
func TestDutyFencesTheOldHolder(t *testing.T) {
	var log dutyLog
	hosts, duties, holder := dutyHosts(t, natstest.RunServer(t), 10*time.Second, &log, "h1", "h2")
	old := duties[holder].Fence()
	if old.Duty != "jobs" || old.Host != hosts[holder].id || old.Epoch == 0 {
		t.Fatalf("the holder's claim: %+v", old)
	}
	if f := duties[1-holder].Fence(); f.Fenced() {
		t.Fatalf("the host standing by has a claim: %+v", f)
	}
	st := hosts[0].c.opts.Ledger
	write := func(f ledger.DutyFence) error {
		return st.Update(t.Context(), func(tx ledger.Tx) error {
			if err := f.Check(tx); err != nil {
				return err
			}
			return tx.SetMeta("~test", "by", []byte(f.Host))
		})
	}
	if err := write(old); err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
	if err := hosts[holder].c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	var next ledger.DutyFence
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
		next = duties[1-holder].Fence()
		if !next.Fenced() {
			return fmt.Errorf("the other host's claim %+v, not holding the duty", next)
		}
		return nil
	})
	if next.Host != hosts[1-holder].id || next.Epoch != old.Epoch+1 {
		t.Fatalf("the new claim %+v after %+v", next, old)
	}
	if err := write(old); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("the old holder's write after the handover: %v, want ErrFenced", err)
	}
	if err := write(next); err != nil {
		t.Fatalf("the new holder's write: %v", err)
	}
	log.assertSerial(t)
}

// refusingStore is a real ledger whose Updates fail while refuse is set,
// counting the refusals: a ledger briefly out of reach.
type refusingStore struct {
	ledger.Store
	refuse  atomic.Bool
	refused atomic.Int32
}

func (s *refusingStore) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	if s.refuse.Load() {
		s.refused.Add(1)
		return errors.New("the ledger is out of reach")
	}
	return s.Store.Update(ctx, fn)
}

// TestDutyWorkWaitsForItsClaim: a host that takes a duty's lease while the
// ledger refuses its claim does not start the work; it tries the claim
// again, and the work starts under the claim once it lands.
func TestDutyWorkWaitsForItsClaim(t *testing.T) {
	st := &refusingStore{Store: openLedger(t)}
	st.refuse.Store(true)
	var log dutyLog
	h := startHost(t, natstest.RunServer(t).URL(), "solo", st, Options{LeaseTTL: 2 * time.Second})
	d, err := h.c.Duty(t.Context(), "jobs", log.work("solo", time.Now))
	if err != nil {
		t.Fatal(err)
	}
	checkfor.Nil(t, 5*time.Second, time.Millisecond, func() error {
		if n := st.refused.Load(); n < 2 {
			return fmt.Errorf("the claim refused %d times, want 2", n)
		}
		return nil
	})
	if len(log.running()) != 0 || d.Held() || d.Fence().Fenced() {
		t.Fatalf("the work runs without a claim: %v, held %v", log.running(), d.Held())
	}
	st.refuse.Store(false)
	checkfor.Nil(t, 5*time.Second, time.Millisecond, func() error { return oneRunning(&log, "") })
	if span, _ := log.last("solo"); span.epoch != 1 || d.Fence().Epoch != 1 {
		t.Fatalf("the work runs at epoch %d (fence %+v), want 1", span.epoch, d.Fence())
	}
}
