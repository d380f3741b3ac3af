package ledgertest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/wasmbench"
	"github.com/berthhq/berth/ledger"
)

// ScaleSubscription is the subscription Fill parks its records under.
const ScaleSubscription = "ShipmentNotifier.onOrderShipped"

// ScaleStart is the first failure of Fill's first record; record i failed
// first i seconds later.
var ScaleStart = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// ScaleRecord is record i of n as Fill writes it: an incident's mix. 1 %
// fail with the class Rare (under Downstream) and a message holding
// "needle", 49 % time out (Timeout under Downstream), 50 % are unknown
// buyers; half wait, 1 % are resuming, the rest retry; one in ten is a
// cart, the rest orders.
func ScaleRecord(i, n int) *ledger.Record {
	first := ScaleStart.Add(time.Duration(i) * time.Second)
	r := &ledger.Record{Subscription: ScaleSubscription, AggregateType: "order",
		AggregateID: fmt.Sprintf("order-%08d", i), Version: uint64(3 + i%5), Position: uint64(i + 1),
		Attempts: 5, FirstFailure: first, LastFailure: first.Add(time.Minute),
		InvocationKey: fmt.Sprintf("%s:order-%08d@3:0", ScaleSubscription, i)}
	if i%10 == 9 {
		r.AggregateType = "cart"
	}
	switch {
	case i%100 == 42:
		r.Error = ledger.ErrorInfo{Classes: []string{"Rare", "Downstream"}, Message: fmt.Sprintf("the needle %d broke", i),
			Kind: "recoverable", Class: "recoverable"}
	case i%2 == 0:
		r.Error = ledger.ErrorInfo{Classes: []string{"UnknownBuyer"}, Kind: "unrecoverable", Class: "unrecoverable",
			Message: fmt.Sprintf("the notification service does not know buyer buyer-%d", i)}
	default:
		r.Error = ledger.ErrorInfo{Classes: []string{"berth.Timeout", "Downstream"}, Kind: "timeout", Class: "recoverable",
			Message: "the attempt ran past its timeout of 10s"}
	}
	switch {
	case i%100 == 7:
		r.State = ledger.StateResuming
	case i%2 == 0:
		r.State, r.WaitReason = ledger.StateWaiting, ledger.WaitUnrecoverable
	default:
		// Due in a year: a host started on a filled ledger is measured
		// serving, not retrying.
		r.State, r.NextRetry = ledger.StateRetrying, first.Add(365*24*time.Hour)
	}
	e := r.Error
	r.AddHistory(ledger.Entry{Time: first, Action: "attempt", Attempt: 1, Version: r.Version, Error: &e})
	r.AddHistory(ledger.Entry{Time: r.LastFailure, Action: "parked", Attempt: 5, Version: r.Version, Error: &e})
	return r
}

// Fill parks records from..to-1 of ScaleRecord in transactions of batch.
func Fill(ctx context.Context, s ledger.Store, from, to, n, batch int) error {
	for i := from; i < to; i += batch {
		err := s.Update(ctx, func(tx ledger.Tx) error {
			for j := i; j < min(i+batch, to); j++ {
				if err := tx.PutParked(ScaleRecord(j, n)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("filling %d..%d: %w", i, min(i+batch, to), err)
		}
	}
	return nil
}

// ScaleSizes are the numbers of parked records BenchmarkScale fills:
// BERTH_SCALE (comma-separated, e.g. "10000,1000000"), else 10,000 and
// 100,000.
func ScaleSizes(b *testing.B) []int {
	v := os.Getenv("BERTH_SCALE")
	if v == "" {
		return []int{10_000, 100_000}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 100 {
			b.Fatalf("BERTH_SCALE: %q is not a number of records (100 or more)", f)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkScale measures the ledger's parked reads and a park with N
// records parked, for each of ScaleSizes, on the stores open gives (one
// fresh store per size, filled through the ledger's API in transactions of
// batch). Each operation's cost should not depend on N (a walk over every
// record, "keys/all", aside); cpu-µs/op is its CPU time, apart from its
// waits for a core on a loaded machine.
func BenchmarkScale(b *testing.B, open func(b *testing.B) ledger.Store, batch int) {
	ctx := context.Background()
	for _, n := range ScaleSizes(b) {
		b.Run(fmt.Sprintf("parked=%d", n), func(b *testing.B) {
			s := open(b)
			start := time.Now()
			if err := Fill(ctx, s, 0, n, n, batch); err != nil {
				b.Fatal(err)
			}
			b.Logf("filled %d in %v", n, time.Since(start))
			sub := ScaleSubscription
			window := ledger.Filter{Subscription: sub, FailedAfter: ScaleStart.Add(time.Duration(n/2) * time.Second),
				FailedBefore: ScaleStart.Add(time.Duration(n/2+n/100) * time.Second)}
			// A window of at least 1,000 records: a full page of carts
			// (one in ten) at every size.
			wide := window
			wide.AggregateType, wide.FailedBefore = "cart", ScaleStart.Add(time.Duration(n/2+max(n/100, 1000))*time.Second)
			waiting := window
			waiting.State = ledger.StateWaiting
			// The same width at every size: what a count costs with N
			// apart from what it costs with the window's width.
			fixed := window
			fixed.FailedBefore = ScaleStart.Add(time.Duration(n/2+1000) * time.Second)
			reads := []struct {
				name string
				fn   func(tx ledger.Tx) (int, error)
			}{
				{"list/first-page", list(ledger.Filter{Subscription: sub})},
				{"list/class-1%", list(ledger.Filter{Subscription: sub, Class: "Rare"})},
				{"list/class-50%+state", list(ledger.Filter{Subscription: sub, Class: "UnknownBuyer", State: ledger.StateWaiting})},
				{"list/message-1%", list(ledger.Filter{Subscription: sub, Message: "NEEDLE"})},
				{"list/window-1%", list(window)},
				{"list/type+window", list(ledger.Filter{Subscription: sub, AggregateType: "cart", FailedAfter: window.FailedAfter, FailedBefore: window.FailedBefore})},
				{"list/type+window-page", list(wide)},
				{"list/class-none", list(ledger.Filter{Subscription: sub, Class: "Nobody"})},
				{"list/disjoint", list(ledger.Filter{Subscription: sub, Class: "UnknownBuyer", State: ledger.StateRetrying})},
				{"list/message-none", list(ledger.Filter{Subscription: sub, Message: "no such words"})},
				{"count/class-50%", count(ledger.Filter{Subscription: sub, Class: "UnknownBuyer"})},
				{"count/state", count(ledger.Filter{Subscription: sub, State: ledger.StateWaiting})},
				{"count/class+type", count(ledger.Filter{Subscription: sub, Class: "Rare", AggregateType: "order"})},
				{"count/window-1%", count(window)},
				{"count/window+state", count(waiting)},
				{"count/window-1000s", count(fixed)},
				{"oldest", func(tx ledger.Tx) (int, error) {
					_, ok, err := tx.OldestParked(sub)
					if !ok {
						return 0, fmt.Errorf("no oldest")
					}
					return 1, err
				}},
				{"counts", func(tx ledger.Tx) (int, error) {
					c, err := tx.CountParked(sub)
					return c[ledger.StateWaiting], err
				}},
			}
			for _, op := range reads {
				b.Run(op.name, func(b *testing.B) {
					b.ReportAllocs()
					defer reportCPU(b, wasmbench.CPUTime())
					for b.Loop() {
						if err := s.View(ctx, func(tx ledger.Tx) error {
							_, err := op.fn(tx)
							return err
						}); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
			b.Run("park", func(b *testing.B) {
				i := n
				defer reportCPU(b, wasmbench.CPUTime())
				for b.Loop() {
					if err := Fill(ctx, s, i, i+1, n, 1); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
			b.Run("keys/all", func(b *testing.B) {
				for b.Loop() {
					err := s.View(ctx, func(tx ledger.Tx) error {
						after := ""
						for {
							page, next, err := tx.ListParkedKeys(sub, after, 1000)
							if err != nil || next == "" {
								_ = page
								return err
							}
							after = next
						}
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// reportCPU reports the process's CPU time per op since start, as
// cpu-µs/op: on a machine shared with other work, what an op costs apart
// from its waits for a core.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(wasmbench.CPUTime()-start)/float64(b.N)/1e3, "cpu-µs/op")
}

func list(f ledger.Filter) func(tx ledger.Tx) (int, error) {
	return func(tx ledger.Tx) (int, error) {
		f.Limit = 100
		page, _, err := tx.ListParked(f)
		return len(page), err
	}
}

func count(f ledger.Filter) func(tx ledger.Tx) (int, error) {
	return func(tx ledger.Tx) (int, error) { return tx.CountMatching(f) }
}
