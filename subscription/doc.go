// Package subscription delivers the events of the event log to handlers and
// owns what happens when they fail: the retry budget, classification of each
// failure, systemic pauses of a partition, backpressure, parking of the one
// failing aggregate in the failure ledger while every other aggregate goes on,
// long-horizon retries of parked aggregates, and the operator's resume and
// skip.
//
// Lock order, outermost first: Engine.mu (Add and Start start subscriptions
// under it), subscription.life (read-held by an operator's call throughout),
// the aggregate's key lock, run.budgets.mu, subscription.cpMu, partition.mu,
// tracker.mu. The scheduler's, the gate's, the key-lock table's, the
// Detector's and Engine.bgMu are leaves, held only over their own fields; an
// attempt's context's is held over its own fields and the making of its
// child context and timer, beneath nothing of the engine's; and the ledger's
// locks are beneath everything: a transaction may start with any of these
// held.
//
// One lock is held across a handler call: the long-horizon retry of a
// parked aggregate holds the aggregate's key lock from reading the record,
// through the long-horizon attempt, to storing its outcome, so that an
// operator's resume or skip of that aggregate cannot interleave with the
// attempt; it waits for it, bounded by the parked timeout, or gives up with
// ErrBusy when its context ends first. The live path holds no lock across
// an attempt (a partition slot is not a lock).
package subscription
