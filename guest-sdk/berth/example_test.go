package berth_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
)

// A reactor that tells buyers their order shipped. Its processor is
// declared as plain data plus one handler per event type; Describe is what
// the host reads when the module is uploaded: the retry budgets, setting by
// setting (zero: inherited), and the error class tree with the classes'
// ancestors. In a module, the processor is passed to berth.Register from an
// init function; berthtest runs its handlers natively.
func ExampleProcessor() {
	notification := berth.NewErrorClass("Notification", nil)
	unknownBuyer := berth.NewErrorClass("UnknownBuyer", notification)

	notifier := &berth.Processor{
		Name: "ShipmentNotifier",
		Kind: berth.Reactor,
		// A buyer the mail service does not know is not fixed by retrying.
		Retry: berth.Retry{MaxAttempts: 3, Timeout: 2 * time.Second, Unrecoverable: []*berth.ErrorClass{unknownBuyer}},
	}
	notifier.On("onShipped", "OrderShipped", func(c *berth.Context) error {
		if c.Event.OwnerID == "" {
			return unknownBuyer.Errorf("order %s has no buyer", c.Event.AggregateID)
		}
		return nil
	}, berth.Retry{MaxAttempts: 5}) // this handler's budget: 5 attempts, the rest from the processor

	if err := notifier.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	d := notifier.Describe()
	fmt.Printf("%s: a %s starting at the %s, %d attempts of at most %v\n", d.Processor, d.Kind, d.Start, d.Retry.MaxAttempts, d.Retry.Timeout)
	for _, h := range d.Handlers {
		fmt.Printf("handler %s on %v: %d attempts\n", h.Name, h.EventTypes, h.Retry.MaxAttempts)
	}
	for _, c := range d.Classes {
		fmt.Printf("class %s, parent %q\n", c.Name, c.Parent)
	}
	// Output:
	// ShipmentNotifier: a reactor starting at the default, 3 attempts of at most 2s
	// handler onShipped on [OrderShipped]: 5 attempts
	// class Notification, parent ""
	// class UnknownBuyer, parent "Notification"
}

// Error classes form a tree: errors.Is sees a class and its ancestors
// through any wrapping, which is how the host's classifier finds the nearest
// class a handler's list names.
func ExampleErrorClass() {
	notification := berth.NewErrorClass("Notification", nil)
	unknownBuyer := berth.NewErrorClass("UnknownBuyer", notification)

	err := fmt.Errorf("notify o-1: %w", unknownBuyer.New("no buyer b-7"))
	fmt.Println(err)
	fmt.Println(errors.Is(err, unknownBuyer), errors.Is(err, notification), errors.Is(err, berth.ClassHost))
	fmt.Println(unknownBuyer.Chain())
	// Output:
	// notify o-1: no buyer b-7
	// true true false
	// [UnknownBuyer Notification]
}
