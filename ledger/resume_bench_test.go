package ledger_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/wasmbench"
	"github.com/berthhq/berth/ledger"
)

// BenchmarkResumeResolve is what the ledger's writer does for one
// aggregate of a bulk resume, per op: the resume (the record read, set
// resuming with a history entry, and a notification, in one Update) and
// its resolution (DeleteParked, in another). Records are parked before
// the timer starts, shaped as the park storm's (two classes, a group, a
// 2.5 KB capsule); default options (no fsync), so the figure is the
// writer's CPU and Badger's commit, not the disk. cpu-µs/op is the
// process's CPU time an op: on a shared machine, what it costs apart
// from the waits for a core.
//
//	go test ./ledger -run '^$' -bench BenchmarkResumeResolve -benchtime 5000x -count 5
func BenchmarkResumeResolve(b *testing.B) {
	s := openBench(b)
	ctx := context.Background()
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	const sub = "ShipmentNotifier.onOrderShipped"
	capsule := bytes.Repeat([]byte("c"), 2500)
	errInfo := ledger.ErrorInfo{Classes: []string{"UnknownBuyer", "NotFound"}, Kind: "unrecoverable",
		Message: "notify shipment: buyer ghost is unknown to the mail service (404)", Module: "shipment-notifier@3f2a9c1e"}
	for i := 0; i < b.N; i += 500 {
		err := s.Update(ctx, func(tx ledger.Tx) error {
			for j := i; j < min(i+500, b.N); j++ {
				first := at.Add(time.Duration(j) * time.Millisecond)
				r := &ledger.Record{Subscription: sub, AggregateType: "order", AggregateID: fmt.Sprintf("storm-%06d", j),
					Version: 1, Position: uint64(j + 1), Error: errInfo, Attempts: 1,
					FirstFailure: first, LastFailure: first, State: ledger.StateWaiting, WaitReason: "unrecoverable"}
				r.AddHistory(ledger.Entry{Time: first, Action: "parked", Attempt: 1, Version: 1, Error: &errInfo})
				if err := tx.PutParked(r); err != nil {
					return err
				}
				if err := tx.PutCapsule(sub, r.AggregateType, r.AggregateID, capsule); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := wasmbench.CPUTime()
	for i := range b.N {
		id := fmt.Sprintf("storm-%06d", i)
		now := at.Add(time.Hour + time.Duration(i)*time.Millisecond)
		err := s.Update(ctx, func(tx ledger.Tx) error {
			r, err := tx.Parked(sub, "order", id)
			if err != nil {
				return err
			}
			r.State, r.WaitReason = ledger.StateResuming, ""
			r.AddHistory(ledger.Entry{Time: now, Action: "resume", Version: 1, Actor: "job 1 (ops)", Reason: "ghost imported"})
			if err := tx.PutParked(r); err != nil {
				return err
			}
			return tx.Notify(ledger.Notification{Type: ledger.NotifyResumed, Time: now, Subscription: sub,
				AggregateType: "order", AggregateID: id, Version: 1, Actor: "job 1 (ops)", Reason: "ghost imported"})
		})
		if err == nil {
			err = s.Update(ctx, func(tx ledger.Tx) error { return tx.DeleteParked(sub, "order", id) })
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((wasmbench.CPUTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}
