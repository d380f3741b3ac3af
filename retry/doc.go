// Package retry decides what Berth does when an event handler fails: how often and how long after it is
// called again, when the failing aggregate is parked, how a parked aggregate is retried over a longer
// horizon, how a failure is classified, and when failures across aggregates add up to an outage.
//
// Everything here is a pure function of its inputs. Time is passed in as a time.Time ("now"), randomness as
// a float64 in [0,1); nothing reads the clock, sleeps or keeps package-level state. The only stateful type
// is [Detector], which holds one partition's recent failures.
//
// The pieces, one file each:
//
//   - settings.go: [Settings], one layer of the retry budget (default < processor < handler < override),
//     [Resolve] into an effective [Policy] that remembers where each setting came from.
//   - duration.go: [ParseDuration] for Go/Kotlin ("1m 30s") and ISO-8601 ("PT1M30S") durations, and
//     [Duration] for TOML.
//   - backoff.go: [Policy.Backoff] and [Policy.BackpressureDelay].
//   - parked.go: [ParkedSettings], the long-horizon schedule of a parked aggregate.
//   - classify.go: [Failure], [Classifier] and [Classify].
//   - builtin.go: the builtin class names (berth.Timeout, ...) and [Builtins], the one list of them.
//   - canceled.go: [IsCanceled], the attempts the host cut short.
//   - retryafter.go: [ParseRetryAfter], the one Retry-After parser, capped at [MaxRetryAfter].
//   - tree.go: [ClassTree], the error class tree a module declares, which [Classify] reads a chain by.
//   - systemic.go: [Detector], which takes failures of several aggregates of a partition within a short
//     window for an outage.
package retry
