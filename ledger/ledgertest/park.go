package ledgertest

import (
	"fmt"
	"time"

	"github.com/berthhq/berth/ledger"
)

// ParkTx parks aggregate order o-i, failed at at, as a host's park does:
// PutParked (with a one-entry history), Notify and SetCheckpoint, for one
// Update. The park benchmarks of every backend share it.
func ParkTx(i int, at time.Time) func(tx ledger.Tx) error {
	id := fmt.Sprintf("o-%d", i)
	errInfo := ledger.ErrorInfo{Classes: []string{"IllegalStateException"}, Message: "The mail service is down.", Kind: "recoverable"}
	r := &ledger.Record{
		Subscription: "ShipmentNotifier.onOrderShipped", AggregateType: "order", AggregateID: id,
		Version: 6, Position: uint64(i + 1), Error: errInfo, Attempts: 5,
		FirstFailure: at, LastFailure: at, State: ledger.StateRetrying, NextRetry: at.Add(3 * time.Minute),
	}
	r.AddHistory(ledger.Entry{Time: at, Action: "parked", Attempt: 5, Version: 6, Error: &errInfo})
	return func(tx ledger.Tx) error {
		if err := tx.PutParked(r); err != nil {
			return err
		}
		if err := tx.Notify(ledger.Notification{Type: "parked", Time: at, Subscription: r.Subscription,
			AggregateType: "order", AggregateID: id, Version: 6, Error: &errInfo}); err != nil {
			return err
		}
		return tx.SetCheckpoint(r.Subscription, uint64(i+2))
	}
}
