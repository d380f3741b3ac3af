package registry_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/subscription"
)

// fsyncRound is how many events each round of BenchmarkProjectionFsync
// delivers on each host.
const fsyncRound = 1000

// BenchmarkProjectionFsync measures what store.sync = "always" costs a
// projection end to end against "none", on two hosts open side by side
// (samples/bench's projection, the default configuration otherwise) that
// take turns: each round appends fsyncRound events to both while their
// subscription is paused, then times the delivery of those on one host and
// then on the other, the first host changing every round. A change in the
// shared machine's load during the run thus weighs on both settings alike,
// which BenchmarkDeliverWasm, one setting after the other, cannot give.
// events/s-always and events/s-none are each host's events over its summed
// delivery times; ratio is the first over the second (the goal: ≥ 0.90).
//
//	go test ./registry -run '^$' -bench BenchmarkProjectionFsync -benchtime 10000x
func BenchmarkProjectionFsync(b *testing.B) {
	wasm, err := benchWasm()
	if err != nil {
		b.Fatal(err)
	}
	g := benchGuests[1]
	ctx := context.Background()
	cache := b.TempDir()
	modes := []string{config.SyncAlways, config.SyncNone}
	hosts := make([]benchHost, len(modes))
	for i, mode := range modes {
		asm, _ := openSynced(b, mode, cache)
		defer asm.Close(ctx)
		info, _, err := asm.Modules.Put(ctx, "bench", wasm[g.kind])
		if err != nil {
			b.Fatal(err)
		}
		for _, sub := range info.Subscriptions {
			if err := asm.Engine.Pause(ctx, sub, subscription.Caller{}); err != nil {
				b.Fatal(err)
			}
		}
		hosts[i] = benchHost{events: asm.Events, engine: asm.Engine}
	}
	took := make([]time.Duration, len(modes))
	used := make([]cpuUse, len(modes))
	b.ResetTimer()
	for round, done := 0, 0; done < b.N; round++ {
		n := min(fsyncRound, b.N-done)
		b.StopTimer()
		for _, h := range hosts {
			benchAppend(b, h.events, n, g.eventType())
		}
		b.StartTimer()
		for k := range hosts {
			i := (k + round) % len(hosts)
			h := hosts[i]
			start := time.Now()
			before := usage(b)
			if err := h.engine.Unpause(ctx, g.sub, subscription.Caller{}); err != nil {
				b.Fatal(err)
			}
			awaitDelivered(b, h.engine, g.sub)
			took[i] += time.Since(start)
			used[i].add(usage(b), before)
			if err := h.engine.Pause(ctx, g.sub, subscription.Caller{}); err != nil {
				b.Fatal(err)
			}
		}
		done += n
	}
	b.StopTimer()
	always := float64(b.N) / took[0].Seconds()
	none := float64(b.N) / took[1].Seconds()
	b.ReportMetric(always, "events/s-always")
	b.ReportMetric(none, "events/s-none")
	b.ReportMetric(always/none, "ratio")
	// The process's CPU an event while each host delivered, and its
	// context switches: what the synced host pays in CPU (Badger's sync
	// calls, the scheduler around them), and in cores left idle.
	for i, mode := range modes {
		u := used[i]
		b.ReportMetric(float64(u.user.Microseconds())/float64(b.N), "user-µs/event-"+mode)
		b.ReportMetric(float64(u.sys.Microseconds())/float64(b.N), "sys-µs/event-"+mode)
		b.ReportMetric((u.user+u.sys).Seconds()/took[i].Seconds(), "cores-"+mode)
		b.ReportMetric(float64(u.switches)/float64(b.N), "ctxsw/event-"+mode)
	}
}

// cpuUse is the process's CPU time, user and system, and its context
// switches, voluntary or not.
type cpuUse struct {
	user, sys time.Duration
	switches  int64
}

// usage returns the process's use so far.
func usage(b *testing.B) cpuUse {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return cpuUse{user: time.Duration(ru.Utime.Nano()), sys: time.Duration(ru.Stime.Nano()), switches: ru.Nvcsw + ru.Nivcsw}
}

// add adds the use between before and now to u.
func (u *cpuUse) add(now, before cpuUse) {
	u.user += now.user - before.user
	u.sys += now.sys - before.sys
	u.switches += now.switches - before.switches
}
