// Package subscription delivers the events of the event log to handlers and
// owns what happens when they fail: the retry budget, classification of each
// failure, systemic pauses of a partition, backpressure, parking of the one
// failing aggregate in the failure ledger while every other aggregate goes on,
// long-horizon retries of parked aggregates, and the operator's resume and
// skip.
//
// Lock order, outermost first: subscription.life, the aggregate's key lock,
// run.budgets.mu, subscription.cpMu, partition.mu, tracker.mu. No lock is held across a
// handler call.
package subscription
