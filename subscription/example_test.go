package subscription_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/subscription"
)

// An engine delivers the log's events to each subscription's Invoker. A
// failure the handler's settings call unrecoverable parks the aggregate at
// once: its record in the ledger says why, and the aggregate's later events
// wait for an operator's resume or skip.
func Example() {
	dir, err := os.MkdirTemp("", "berth-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	log, err := eventlog.Open(dir+"/log", eventlog.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer log.Close(ctx)
	store, err := ledger.Open(dir+"/ledger", ledger.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close(ctx)

	notify := subscription.InvokerFunc(func(_ context.Context, d subscription.Delivery) *retry.Failure {
		return &retry.Failure{Classes: []string{"UnknownBuyer"}, Message: "no buyer " + d.Commit.AggregateID}
	})
	parked := make(chan string, 1)
	eng, err := subscription.Open(log, store, subscription.Options{Observer: parkObserver(parked)}, subscription.Spec{
		Processor: "ShipmentNotifier", Handler: "onOrderShipped", Start: subscription.StartBeginning,
		HandlerRetry: retry.Settings{Unrecoverable: []string{"UnknownBuyer"}}, Invoker: notify,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close(ctx)
	if err := eng.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	_, err = log.Append(ctx, eventlog.AppendRequest{AggregateType: "Order", AggregateID: "o-1",
		ExpectedVersion: eventlog.AnyVersion, Events: []eventlog.Event{{Type: "OrderShipped", Payload: []byte(`{}`)}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	select {
	case sub := <-parked:
		rec, err := eng.Parked(ctx, sub, "Order", "o-1")
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(rec.State, rec.WaitReason, rec.Error.Class, rec.Error.Message)
	case <-time.After(20 * time.Second):
		fmt.Println("not parked within 20s")
	}
	// Output: waiting unrecoverable unrecoverable no buyer o-1
}

// parkObserver tells parked the subscription of each park; the engine's
// other news is not needed here.
type parkObserver chan string

func (o parkObserver) Parked(sub string) { o <- sub }

func (parkObserver) Started(string, []subscription.Attempt) {}
func (parkObserver) Attempted(subscription.Attempt)         {}
func (parkObserver) Retried(string, bool)                   {}
func (parkObserver) Resolved(subscription.Resolution)       {}
