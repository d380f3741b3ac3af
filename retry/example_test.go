package retry_test

import (
	"fmt"
	"time"

	"github.com/berthhq/berth/retry"
)

// The ShipmentNotifier of samples/shipment-notifier: the processor gives its handlers five attempts,
// one to thirty seconds apart, ten seconds each, and parks an unknown buyer at once; the host overrides
// the attempts and the timeout for the one subscription.
func ExampleResolve() {
	processor := retry.Settings{
		MaxAttempts:    5,
		InitialBackoff: time.Second,
		MaxBackoff:     30 * time.Second,
		Timeout:        10 * time.Second,
		Unrecoverable:  []string{"UnknownBuyer"},
	}
	override := retry.Settings{MaxAttempts: 8, Timeout: 20 * time.Second}
	p := retry.Resolve(
		retry.Layer{Source: retry.SourceProcessor, Settings: processor},
		retry.Layer{Source: retry.SourceOverride, Settings: override},
	)
	if err := p.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("max-attempts", p.MaxAttempts, "from", p.Sources[retry.KeyMaxAttempts])
	fmt.Println("timeout", p.Timeout, "from", p.Sources[retry.KeyTimeout])
	fmt.Println("unrecoverable", p.Unrecoverable, "from", p.Sources[retry.KeyUnrecoverable])
	fmt.Println("backpressure-attempts", p.BackpressureAttempts, "from", p.Sources[retry.KeyBackpressureAttempts])
	for n := 1; n < p.MaxAttempts; n++ {
		fmt.Print(p.Backoff(n), " ")
	}
	fmt.Println()
	// Output:
	// max-attempts 8 from override
	// timeout 20s from override
	// unrecoverable [UnknownBuyer] from processor
	// backpressure-attempts 20 from default
	// 1s 2s 4s 8s 16s 30s 30s
}

// The ShipmentNotifier again: a buyer the notification service does not know parks the order at
// once; any other error is retried within the budget.
func ExampleClassify() {
	p := retry.Resolve(retry.Layer{Source: retry.SourceProcessor, Settings: retry.Settings{
		MaxAttempts:    5,
		InitialBackoff: time.Second,
		MaxBackoff:     30 * time.Second,
		Timeout:        10 * time.Second,
		Unrecoverable:  []string{"UnknownBuyer"},
	}})
	app, err := retry.NewClassifier([]retry.Rule{{Class: "MailServiceDown", As: "systemic"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range []*retry.Failure{
		{Classes: []string{"UnknownBuyer", "NotificationError"}, Message: "buyer b-7 is not known"},
		{Classes: []string{"IllegalStateException"}, Message: "The mail service is down."},
		{Classes: []string{"MailServiceDown"}},
		{Classes: []string{retry.ClassTimeout}, Message: "attempt ran over 10s"},
		{Message: "too many requests", HTTP429: true, RetryAfter: 2 * time.Second},
	} {
		d := retry.Classify(f, &p, app)
		fmt.Printf("%-50q %-13s %s", f.Error(), d.Class, d.Reason)
		if d.RetryAfter > 0 {
			fmt.Printf(" (retry after %s)", d.RetryAfter)
		}
		fmt.Println()
	}
	// Output:
	// "UnknownBuyer: buyer b-7 is not known"             unrecoverable handler unrecoverable: UnknownBuyer
	// "IllegalStateException: The mail service is down." recoverable   default
	// "MailServiceDown"                                  systemic      classifier rule 1: MailServiceDown
	// "berth.Timeout: attempt ran over 10s"              recoverable   builtin: berth.Timeout
	// "too many requests"                                backpressure  outbound HTTP 429 (retry after 2s)
}

// The default long-horizon schedule of a parked aggregate.
func ExampleParkedSettings_Next() {
	p := retry.DefaultParked()
	parked := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	last := parked
	for done := 0; ; done++ {
		at, ok := p.Next(done, last)
		if !ok {
			fmt.Println("then an operator resumes or skips")
			break
		}
		fmt.Printf("retry %2d after %-5s at %s\n", done+1, p.Delay(done+1), at.Format("15:04"))
		last = at
	}
	// Output:
	// retry  1 after 3m0s  at 09:03
	// retry  2 after 6m0s  at 09:09
	// retry  3 after 12m0s at 09:21
	// retry  4 after 24m0s at 09:45
	// retry  5 after 48m0s at 10:33
	// retry  6 after 1h0m0s at 11:33
	// retry  7 after 1h0m0s at 12:33
	// retry  8 after 1h0m0s at 13:33
	// retry  9 after 1h0m0s at 14:33
	// retry 10 after 1h0m0s at 15:33
	// then an operator resumes or skips
}

func ExampleParseDuration() {
	for _, s := range []string{"500ms", "1m 30s", "1d", "PT1M30S", "P1DT2H", "-1s", "30s 1m"} {
		d, err := retry.ParseDuration(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(s, "=", d)
	}
	// Output:
	// 500ms = 500ms
	// 1m 30s = 1m30s
	// 1d = 24h0m0s
	// PT1M30S = 1m30s
	// P1DT2H = 26h0m0s
	// retry: invalid duration "-1s": must not be negative
	// retry: invalid duration "30s 1m": unit "m" out of order (write larger units first, each once)
}
