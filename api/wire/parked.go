package wire

import "time"

// The states of a parked aggregate (ParkedRecord.State), in the order an
// operator reads them.
const (
	// StateRetrying: long-horizon retries are still scheduled.
	StateRetrying = "retrying"
	// StateWaiting: it waits for an operator (WaitReason says why).
	StateWaiting = "waiting"
	// StateResuming: resumed; the held events are being delivered again.
	StateResuming = "resuming"
)

// ParkedStates returns the states of a parked aggregate, in the order an
// operator reads them.
func ParkedStates() []string { return []string{StateRetrying, StateWaiting, StateResuming} }

// Why a waiting aggregate waits for an operator (ParkedRecord.WaitReason).
const (
	// WaitUnrecoverable: the failure was unrecoverable and
	// subscription.parked.retry-unrecoverable is off.
	WaitUnrecoverable = "unrecoverable"
	// WaitRetriesSpent: its long-horizon retries are spent.
	WaitRetriesSpent = "retries-spent"
	// WaitNoRetries: the subscription has no long-horizon retries
	// (subscription.parked.max-retries = -1).
	WaitNoRetries = "no-retries"
)

// ParkedRecord is one parked aggregate of one subscription, with its
// history (the latest entries).
type ParkedRecord struct {
	Subscription  string    `json:"subscription"`
	AggregateType string    `json:"aggregateType"`
	AggregateID   string    `json:"aggregateId"`
	Version       uint64    `json:"version"`  // the version of the commit it stopped at
	Index         uint32    `json:"index"`    // the event within that commit
	Position      uint64    `json:"position"` // the global position of that commit
	Error         ErrorInfo `json:"error"`
	Attempts      int       `json:"attempts"`      // attempts in all at the stopped event
	ParkedRetries int       `json:"parkedRetries"` // long-horizon retries done
	FirstFailure  time.Time `json:"firstFailure"`
	LastFailure   time.Time `json:"lastFailure"`
	State         string    `json:"state"`              // StateRetrying, StateWaiting or StateResuming
	NextRetry     time.Time `json:"nextRetry,omitzero"` // zero unless retrying
	// WaitReason says, while waiting, why (WaitUnrecoverable,
	// WaitRetriesSpent, WaitNoRetries); empty otherwise, and in records
	// parked before the host kept it.
	WaitReason string         `json:"waitReason,omitempty"`
	History    []HistoryEntry `json:"history"`
	// InvocationKey is the key the handler is given for the stopped event;
	// empty in records parked before the host kept it.
	InvocationKey string `json:"invocationKey,omitempty"`
}

// ErrorInfo is a failure of a parked aggregate.
type ErrorInfo struct {
	Classes []string `json:"classes,omitempty"` // the class chain it was classified by, nearest first
	Message string   `json:"message"`
	Code    string   `json:"code,omitempty"`
	Kind    string   `json:"kind"` // recoverable, unrecoverable, timeout, trap, memory, …
	// Class is what the failure was taken for: recoverable, unrecoverable,
	// systemic or backpressure (empty in records parked before it was kept).
	Class string `json:"class,omitempty"`
	// Reason says what classified it, e.g. "handler unrecoverable: Fatal".
	Reason string `json:"reason,omitempty"`
	// Undeclared lists the classes of Classes the module does not declare
	// in its class tree (berth.* names aside).
	Undeclared []string `json:"undeclared,omitempty"`
	// Module is the module version that ran the failing attempt, e.g.
	// "shipment-notifier v3" (GET /v1/modules/{name}/versions lists them);
	// empty in records parked before the host kept it.
	Module string `json:"module,omitempty"`
}

// HistoryEntry is one line of a parked aggregate's history.
type HistoryEntry struct {
	Time time.Time `json:"time"`
	// Action is attempt, parked, retry, retries-spent, retries-stopped,
	// resume, skip, resumed, …
	Action  string     `json:"action"`
	Attempt int        `json:"attempt,omitempty"`
	Version uint64     `json:"version,omitempty"`
	Error   *ErrorInfo `json:"error,omitempty"`
	Actor   string     `json:"actor,omitempty"` // who resumed or skipped
	Reason  string     `json:"reason,omitempty"`
}

// ParkedRecordDetail is the answer of
// GET /v1/subscriptions/{name}/parked/{type}/{id}: the record with what an
// operator needs to choose between resume and skip.
type ParkedRecordDetail struct {
	ParkedRecord
	Event       *Event `json:"event,omitempty"` // the event it stopped at; nil if the log no longer has it
	HeldCommits uint64 `json:"heldCommits"`     // later commits of the aggregate it holds back
	// Capsule is the path of the recording of its failed attempt
	// (GET .../parked/{type}/{id}/capsule), empty when none was kept.
	Capsule string `json:"capsule,omitempty"`
}

// ParkedPage is the answer of GET /v1/parked.
type ParkedPage struct {
	Records []ParkedRecord `json:"records"`
	Next    string         `json:"next"` // the cursor of the next page (pass it as after); "" on the last
}

// ParkedGroup is one failure group: the parked records of a subscription
// that failed for one cause (the same module, class chain and message
// once its variable parts are masked).
type ParkedGroup struct {
	Subscription string `json:"subscription"`
	// Group is its fingerprint: the group= filter of GET /v1/parked and of
	// a job's filter.
	Group string `json:"group"`
	// Message is the masked message its records share ("{}" where they
	// differ).
	Message string   `json:"message"`
	Classes []string `json:"classes"`
	// Module is the module its records failed in, without version.
	Module string `json:"module"`
	// Count is how many records it holds that pass the filter, exact.
	Count int `json:"count"`
	// FirstFailure and LastFailure span the failures of the records that
	// joined it since it opened.
	FirstFailure time.Time `json:"firstFailure"`
	LastFailure  time.Time `json:"lastFailure"`
	// Modules counts its records by module version.
	Modules ModuleCounts `json:"modules"`
	// Sample is one of its records: its aggregate type and id.
	SampleType string `json:"sampleType"`
	SampleID   string `json:"sampleId"`
}

// ModuleCounts counts records by module version ("shipment-notifier v3").
type ModuleCounts map[string]int

// ParkedGroupPage is the answer of GET /v1/parked/groups.
type ParkedGroupPage struct {
	Groups []ParkedGroup `json:"groups"`
	Next   string        `json:"next"` // the cursor of the next page (pass it as after); "" on the last
}

// ProofRequest is the body of POST /v1/parked/groups/{group}/proofs: what
// a candidate module did with the group's capsules (`berth parked replay
// --group G --module FIX.wasm` sends it). A large group's handled
// aggregates are sent in several requests, each with the same counts.
type ProofRequest struct {
	Subscription string `json:"subscription"`
	Module       string `json:"module"`
	SHA256       string `json:"sha256"`
	Replayed     int    `json:"replayed"`
	Handled      int    `json:"handled"`
	StillFailing int    `json:"stillFailing"`
	Departed     int    `json:"departed"`
	// Aggregates are (a page of) the aggregates the candidate handled.
	Aggregates []ProofAggregate `json:"aggregates"`
}

// ProofAggregate names one aggregate of a proof.
type ProofAggregate struct {
	AggregateType string `json:"aggregateType"`
	AggregateID   string `json:"aggregateId"`
}

// Proof is a kept verdict of a candidate on a failure group.
type Proof struct {
	Subscription string    `json:"subscription"`
	Group        string    `json:"group"`
	Module       string    `json:"module"`
	SHA256       string    `json:"sha256"`
	Replayed     int       `json:"replayed"`
	Handled      int       `json:"handled"`
	StillFailing int       `json:"stillFailing"`
	Departed     int       `json:"departed"`
	Actor        string    `json:"actor"`
	Created      time.Time `json:"created"`
}

// OperatorRequest is the optional body of resume and skip.
type OperatorRequest struct {
	// Reason is kept in the record's history and the webhook notification.
	Reason string `json:"reason,omitempty"`
	// ThroughVersion, for skip only, skips the events up to and including
	// this version (0: every event of the aggregate in the log now).
	ThroughVersion uint64 `json:"throughVersion,omitempty"`
}

// ResolvedRecord is a parked aggregate's record kept after it was resumed or
// skipped (GET /v1/resolved): its error, attempts and whole history, with
// who resolved it and why as its last entries.
type ResolvedRecord struct {
	ParkedRecord
	ResolvedAt time.Time `json:"resolvedAt"` // the time of its last history entry
}

// ResolvedPage is the answer of GET /v1/resolved.
type ResolvedPage struct {
	Records []ResolvedRecord `json:"records"`
	Next    string           `json:"next"` // the cursor of the next page (pass it as after); "" on the last
}
