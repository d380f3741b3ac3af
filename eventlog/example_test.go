package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/berthhq/berth/eventlog"
)

// Two orders are placed and one ships; an append that expected an older
// version of its aggregate is refused. Read returns the commits in the
// order of their global positions, which have no gaps.
func Example() {
	dir, err := os.MkdirTemp("", "eventlog-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	log, err := eventlog.Open(dir, eventlog.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	defer log.Close(ctx)

	for _, r := range []eventlog.AppendRequest{
		{AggregateType: "Order", AggregateID: "o-1", ExpectedVersion: 0, Events: []eventlog.Event{{Type: "OrderPlaced", Payload: []byte(`{"total":30}`)}}},
		{AggregateType: "Order", AggregateID: "o-2", ExpectedVersion: 0, Events: []eventlog.Event{{Type: "OrderPlaced", Payload: []byte(`{"total":12}`)}}},
		{AggregateType: "Order", AggregateID: "o-1", ExpectedVersion: 1, Events: []eventlog.Event{{Type: "OrderShipped", Payload: []byte(`{"carrier":"DHL"}`)}}},
	} {
		c, err := log.Append(ctx, r)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("appended %s/%s at version %d, position %d\n", c.AggregateType, c.AggregateID, c.Version, c.Position)
	}

	// Someone who read o-1 before it shipped cannot append after version 1.
	_, err = log.Append(ctx, eventlog.AppendRequest{AggregateType: "Order", AggregateID: "o-1", ExpectedVersion: 1,
		Events: []eventlog.Event{{Type: "OrderCancelled", Payload: []byte(`{}`)}}})
	fmt.Println("stale append refused:", errors.Is(err, eventlog.ErrVersionConflict))

	commits, err := log.Read(ctx, 2, 10) // from position 2
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range commits {
		fmt.Printf("%d: %s/%s@%d %s %s\n", c.Position, c.AggregateType, c.AggregateID, c.Version, c.Events[0].Type, c.Events[0].Payload)
	}
	// Output:
	// appended Order/o-1 at version 1, position 1
	// appended Order/o-2 at version 1, position 2
	// appended Order/o-1 at version 2, position 3
	// stale append refused: true
	// 2: Order/o-2@1 OrderPlaced {"total":12}
	// 3: Order/o-1@2 OrderShipped {"carrier":"DHL"}
}
