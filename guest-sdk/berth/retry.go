package berth

import (
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

// Retry is a processor's or a handler's retry budget. A zero field is
// inherited: a handler's from its processor, a processor's from the host's
// [subscription.retry], whose defaults are given below (docs/config.md).
// The operator may still override any setting per subscription
// ([subscriptions.<name>.retry]), over the module's: host default <
// processor < handler < override.
type Retry struct {
	MaxAttempts    int           // the calls in all, at least 1 (1: no retry); host default 5
	InitialBackoff time.Duration // the wait after the first failure, each next one twice as long; host default 100ms
	MaxBackoff     time.Duration // the longest wait between attempts; host default 5s
	Timeout        time.Duration // how long one attempt may run; a longer one is stopped and fails as berth.Timeout (ClassTimeout); host default 30s
	Unrecoverable  []*ErrorClass // classes that park the aggregate at once, without a retry; host default none
	Recoverable    []*ErrorClass // classes retried within the budget even if they look like an outage; host default none
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
