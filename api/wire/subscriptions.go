package wire

import "time"

// Subscription is a subscription's state (GET /v1/subscriptions/{name}, and
// the answer of pause, unpause and reset).
type Subscription struct {
	Name   string `json:"name"`
	Module string `json:"module,omitempty"` // the module serving it
	State  string `json:"state"`            // running, paused, starting or stopped
	// StartError is, while starting, why the last try to start it failed
	// (its event log or ledger away); it is tried again until it starts.
	StartError string `json:"startError,omitempty"`
	// PausedUntil is, while paused until a time, when it goes on by itself.
	PausedUntil time.Time `json:"pausedUntil,omitzero"`
	// Checkpoint: every commit below it was handled, passed over or held
	// for a parked aggregate.
	Checkpoint uint64 `json:"checkpoint"`
	// DurableCheckpoint is the checkpoint last written; a restart delivers
	// again from there.
	DurableCheckpoint uint64 `json:"durableCheckpoint"`
	// Head is the log's last position; Lag the commits at or after the
	// checkpoint. Both are absent (nil) while Unread is set: not known,
	// so that a script waiting for lag 0 is not told "caught up".
	Head   *uint64      `json:"head,omitempty"`
	Lag    *uint64      `json:"lag,omitempty"`
	Parked ParkedCounts `json:"parked"`
	// Unread says, during an outage of the event log or the ledger, what
	// this host could not read: head and lag are then absent and parked
	// empty; the rest is the host's own and current.
	Unread string `json:"unread,omitempty"`
	// Partitions: in the list, only the partitions not idle; by name, all.
	Partitions    []Partition    `json:"partitions,omitempty"`
	Retry         RetrySettings  `json:"retry"`
	ParkedRetries ParkedSettings `json:"parkedRetries"`
}

// ParkedCounts counts parked aggregates by state (StateRetrying,
// StateWaiting, StateResuming); never nil in an answer.
type ParkedCounts map[string]int

// RetrySettings are a subscription's effective retry settings by key
// (max-attempts, initial-backoff, max-backoff, timeout, unrecoverable,
// recoverable, backpressure-attempts).
type RetrySettings map[string]RetrySetting

// RetrySetting is one effective retry setting and the layer it came from.
type RetrySetting struct {
	// Value is an integer (max-attempts, backpressure-attempts), a duration
	// string (initial-backoff, max-backoff, timeout) or a list of error class
	// names (unrecoverable, recoverable).
	Value any `json:"value"`
	// Source is the layer: default, processor, handler or override.
	Source string `json:"source"`
}

// ParkedSettings are the effective long-horizon retry settings of parked
// aggregates ([subscription.parked]); durations are Go durations ("1m30s").
type ParkedSettings struct {
	MaxRetries int    `json:"maxRetries"` // -1: none
	FirstDelay string `json:"firstDelay"`
	MaxDelay   string `json:"maxDelay"`
	Timeout    string `json:"timeout"`
	// RetryUnrecoverable is subscription.parked.retry-unrecoverable in
	// effect: whether an aggregate parked unrecoverable is retried too.
	RetryUnrecoverable bool `json:"retryUnrecoverable"`
}

// Partition is one partition of a subscription.
type Partition struct {
	Index        int       `json:"index"`
	State        string    `json:"state"` // running, holding or systemic-paused
	PauseReason  string    `json:"pauseReason,omitempty"`
	PausedSince  time.Time `json:"pausedSince,omitzero"`
	NextProbe    time.Time `json:"nextProbe,omitzero"` // when the probe under way was due
	FailedProbes int       `json:"failedProbes,omitempty"`
	// Concurrency is the current limit of aggregates handled at once,
	// lowered by backpressure.
	Concurrency int `json:"concurrency"`
	Active      int `json:"active"`
	Held        int `json:"held"` // parked aggregates held in memory
}

// SubscriptionList is the answer of GET /v1/subscriptions.
type SubscriptionList struct {
	Subscriptions []Subscription `json:"subscriptions"`
}

// ResetRequest is the body of POST /v1/subscriptions/{name}/reset.
type ResetRequest struct {
	// Position is where delivery restarts: 1 replays from the beginning,
	// head+1 skips to the end. Required.
	Position *uint64 `json:"position"`
}

// PauseRequest is the optional body of POST /v1/subscriptions/{name}/pause.
type PauseRequest struct {
	// Until, when given, ends the pause by itself at that time (it must be
	// in the future); left out, the pause lasts until an unpause.
	Until *time.Time `json:"until,omitempty"`
	// Reason is kept in the audit log.
	Reason string `json:"reason,omitempty"`
}
