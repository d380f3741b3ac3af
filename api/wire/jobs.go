package wire

import "time"

// JobFilter selects the parked aggregates a bulk job acts on; every
// condition given must hold (as GET /v1/parked's parameters).
type JobFilter struct {
	// Subscriptions: only these (empty: all).
	Subscriptions []string `json:"subscriptions,omitempty"`
	State         string   `json:"state,omitempty"`         // retrying, waiting or resuming
	AggregateType string   `json:"aggregateType,omitempty"` // only of this type
	// Class: only those whose error's class chain holds it (the class and
	// every class below it in the module's tree). A class no deployed module
	// declares, no classifier rule names and no builtin class is, that no
	// record carries, is a 400 naming the nearest declared classes.
	Class string `json:"class,omitempty"`
	// Message: only those whose error message holds it, ignoring case.
	Message string `json:"message,omitempty"`
	// Group: only those of this failure group (its fingerprint, as
	// GET /v1/parked/groups lists it).
	Group string `json:"group,omitempty"`
	// Proven, with group: only the aggregates this candidate handled
	// when the group was replayed against it (POST
	// /v1/parked/groups/{group}/proofs); a job is refused (409) unless the
	// candidate is the module version deployed.
	Proven *JobProof `json:"proven,omitempty"`
	// FailedAfter and FailedBefore bound the first failure.
	FailedAfter  *time.Time `json:"failedAfter,omitempty"`
	FailedBefore *time.Time `json:"failedBefore,omitempty"`
}

// JobProof names a candidate module by its name and the SHA-256 of its
// bytes.
type JobProof struct {
	Module string `json:"module"`
	SHA256 string `json:"sha256"`
}

// JobRequest is the body of POST /v1/jobs.
type JobRequest struct {
	Action string    `json:"action"` // resume or skip
	Filter JobFilter `json:"filter"`
	// Reason is kept in each aggregate's history and the job; required
	// unless DryRun.
	Reason string `json:"reason,omitempty"`
	// Rate is the records a second the job acts on at most (default
	// jobs.default-rate, at most jobs.max-rate).
	Rate *float64 `json:"rate,omitempty"`
	// DryRun answers with the count and a sample and changes nothing.
	DryRun bool `json:"dryRun,omitempty"`
}

// JobDryRun is the answer of a dry run: what a job would act on now.
type JobDryRun struct {
	Matched int            `json:"matched"`
	Sample  []ParkedRecord `json:"sample"` // the first few, in the order the job would take them
}

// JobFailure is one aggregate a job could not act on.
type JobFailure struct {
	Time          time.Time `json:"time"`
	Subscription  string    `json:"subscription"`
	AggregateType string    `json:"aggregateType"`
	AggregateID   string    `json:"aggregateId"`
	Error         string    `json:"error"`
}

// Job is a bulk job (POST /v1/jobs, GET /v1/jobs/{id}).
type Job struct {
	ID       uint64    `json:"id"`
	Action   string    `json:"action"`
	State    string    `json:"state"` // running, done or cancelled
	Filter   JobFilter `json:"filter"`
	Actor    string    `json:"actor"`
	Reason   string    `json:"reason"`
	Rate     float64   `json:"rate"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
	Finished time.Time `json:"finished,omitzero"`
	// Matched is what the filter matched when the job was created; Done,
	// Failed and Gone count the aggregates acted on, those that failed,
	// and those resolved by someone else before the job reached them.
	Matched         int          `json:"matched"`
	Done            int          `json:"done"`
	Failed          int          `json:"failed"`
	Gone            int          `json:"gone"`
	Failures        []JobFailure `json:"failures"`
	FailuresDropped int          `json:"failuresDropped,omitempty"` // failures past the 100 kept
	// Stopped says why the host ended the job itself (state cancelled):
	// a proven job whose candidate is no longer the version deployed.
	Stopped string `json:"stopped,omitempty"`
}

// JobList is the answer of GET /v1/jobs, newest first.
type JobList struct {
	Jobs []Job  `json:"jobs"`
	Next string `json:"next"` // pass as after for the next page; "" on the last
}
