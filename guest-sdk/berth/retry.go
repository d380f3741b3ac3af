package berth

import (
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

// Retry is a processor's or a handler's retry budget, the Go form of the
// spec's @Retry. A zero field is inherited: a handler's from its processor,
// a processor's from the host's [subscription.retry] (5 attempts, 100ms
// doubling to 5s). The host may still override any setting per subscription.
type Retry struct {
	MaxAttempts    int           // the calls in all, at least 1
	InitialBackoff time.Duration // the wait after the first failure; each next wait doubles
	MaxBackoff     time.Duration // the longest wait between attempts
	Timeout        time.Duration // how long one attempt may run; a longer one counts as failed
	Unrecoverable  []*ErrorClass // classes that park the aggregate at once
	Recoverable    []*ErrorClass // classes retried within the budget even if they look like an outage
}

func (r *Retry) settings() abi.RetrySettings {
	return abi.RetrySettings{
		MaxAttempts:    uint32(max(r.MaxAttempts, 0)),
		InitialBackoff: r.InitialBackoff,
		MaxBackoff:     r.MaxBackoff,
		Timeout:        r.Timeout,
		Unrecoverable:  names(r.Unrecoverable),
		Recoverable:    names(r.Recoverable),
	}
}

func names(cs []*ErrorClass) []string {
	if len(cs) == 0 {
		return nil
	}
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.name
	}
	return out
}
