// Package retry decides what Berth does when an event handler fails: how often and how long after it is
// called again, when the failing aggregate is parked, how a parked aggregate is retried over a longer
// horizon, how a failure is classified, and when failures across aggregates add up to an outage.
//
// Everything here is a pure function of its inputs. Time is passed in as a time.Time ("now"), randomness as
// a float64 in [0,1); nothing reads the clock, sleeps or keeps package-level state. The only stateful type
// is [Detector], which holds one partition's recent failures.
//
// It is the one owner of:
//
//   - the retry budget's defaults (DefaultMaxAttempts and the others) and its layering, default <
//     processor < handler < override: [Settings] is one layer, [Resolve] makes the effective [Policy],
//     which remembers where each setting came from;
//   - the waits: [Policy.Backoff] between attempts, [Policy.BackpressureDelay] after a busy answer, and
//     [ParkedSettings], the long-horizon schedule of a parked aggregate;
//   - classification: [Classify] by the module's declared [ClassTree], the handler's lists, the guest's
//     report, the operator's [Classifier] rules and the builtin classes ([Builtins], the one list of the
//     berth.* names); [IsCanceled] tells an attempt the host cut short;
//   - the outage rule: [Detector] takes failures of several aggregates of a partition within a short
//     window for an outage;
//   - two parsers the host uses everywhere: [ParseDuration] for Go/Kotlin ("1m 30s") and ISO-8601
//     ("PT1M30S") durations ([Duration] in TOML), and [ParseRetryAfter], capped at [MaxRetryAfter].
package retry
