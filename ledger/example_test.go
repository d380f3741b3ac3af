package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/berthhq/berth/ledger"
)

// An aggregate is parked and its subscription's checkpoint moves past the
// event in one Update: both are committed or neither. A closure that
// returns an error commits none of its writes.
func ExampleBadger_Update() {
	dir, err := os.MkdirTemp("", "ledger-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	store, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	defer store.Close(ctx)

	const sub = "ShipmentNotifier.onShipped"
	err = store.Update(ctx, func(tx ledger.Tx) error {
		if err := tx.PutParked(&ledger.Record{
			Subscription: sub, AggregateType: "Order", AggregateID: "o-1", Version: 3, Position: 41,
			Error:    ledger.ErrorInfo{Classes: []string{"UnknownBuyer"}, Message: "no buyer b-7", Kind: "unrecoverable"},
			Attempts: 1, State: ledger.StateWaiting, WaitReason: ledger.WaitUnrecoverable,
		}); err != nil {
			return err
		}
		return tx.SetCheckpoint(sub, 42)
	})
	fmt.Println("park:", err)

	// The closure fails after a write: the write is rolled back with it.
	// (Update may run a closure more than once, so it has no effect outside
	// its Tx.)
	err = store.Update(ctx, func(tx ledger.Tx) error {
		if err := tx.SetCheckpoint(sub, 43); err != nil {
			return err
		}
		return errors.New("the resume was refused")
	})
	fmt.Println("resume:", err)

	err = store.View(ctx, func(tx ledger.Tx) error {
		rec, err := tx.Parked(sub, "Order", "o-1")
		if err != nil {
			return err
		}
		pos, _, err := tx.Checkpoint(sub)
		fmt.Printf("Order/%s parked at version %d (%s, %s); checkpoint %d\n", rec.AggregateID, rec.Version, rec.State, rec.WaitReason, pos)
		return err
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// park: <nil>
	// resume: the resume was refused
	// Order/o-1 parked at version 3 (waiting, unrecoverable); checkpoint 42
}
