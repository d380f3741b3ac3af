// Package ledger is the host's one transactional state store: what the
// host must neither lose nor half-write is kept in it, so that a change that
// touches several kinds of state is one transaction (a park, its
// notification and the partition's fence commit together or not at all).
// It owns:
//
//   - the failure records: one per parked aggregate of a subscription,
//     indexed by state, class, aggregate type and first failure and
//     counted by them in the same transaction, with the capsule of its
//     failed attempt, and the resolved ones until the retention sweeps
//     them ([ParkedRecords]);
//   - the subscriptions' checkpoints, whole and per partition, and the
//     small state kept beside them: paused, retry budgets
//     ([SubscriptionState]);
//   - the claims: each partition's owner and each duty's holder at an
//     epoch, and the fences that fail the writes of a host that lost one
//     ([Claims], [DutyFence]);
//   - the operators' bulk jobs and the audit log ([Operations]);
//   - the outbox of notifications about parked aggregates ([Outbox]),
//     which package webhook delivers;
//   - the projections' read models and the last event applied to each
//     ([ReadModels]).
//
// The events themselves are not here but in the event log (package
// eventlog). A [Store] runs closures as transactions on a [Tx], which is
// those roles together. [Open] keeps the ledger in Badger for one host;
// ledger/jetstream keeps it in a JetStream stream shared by every host of a
// deployment. Both run the same key layout through one Tx ([OnKV]), and
// ledger/ledgertest is the contract both pass. No Badger type leaves the
// ledger's packages.
package ledger

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"
)

// Errors returned by every Store implementation.
var (
	// ErrNotFound means no record exists under the given key.
	ErrNotFound = errors.New("ledger: not found")
	// ErrClosed means the store was closed.
	ErrClosed = errors.New("ledger: closed")
	// ErrInvalid means a write or a query was malformed: a record without
	// subscription, aggregate type or id, an unknown State, a cursor no
	// ListParked returned.
	ErrInvalid = errors.New("ledger: invalid")
	// ErrReadOnly means a write was attempted in a read-only (View)
	// transaction.
	ErrReadOnly = errors.New("ledger: write in a read-only transaction")
	// ErrTooBig means a transaction grew larger than the store can commit at
	// once. Nothing of it is committed; split the work over transactions.
	ErrTooBig = errors.New("ledger: transaction too big")
	// ErrFenced means a transaction was fenced off: the partition or duty
	// it acts for is owned by another host or a later epoch (see Tx.Fence,
	// Tx.FenceDuty). Nothing of it is committed; its host must stop working
	// on that partition or duty.
	ErrFenced = errors.New("ledger: fenced")
)

// State is where a parked aggregate stands.
type State string

const (
	// StateRetrying: parked, with long-horizon retries still scheduled.
	StateRetrying State = "retrying"
	// StateWaiting: its long-horizon retries are spent; it waits for an operator.
	StateWaiting State = "waiting"
	// StateResuming: an operator, a successful retry or the host (taking
	// back a park an outage's failures made) resumed it; the held events
	// are being replayed from its stream.
	StateResuming State = "resuming"
)

// ErrorInfo is a failure as the ledger keeps it.
type ErrorInfo struct {
	Classes []string `json:"classes,omitempty"` // class chain, nearest first
	Message string   `json:"message"`
	Code    string   `json:"code,omitempty"`
	Kind    string   `json:"kind"` // recoverable, unrecoverable, timeout, trap, memory, …
	// Class is what the failure was taken for: recoverable, unrecoverable,
	// systemic or backpressure (empty in records written before it was kept).
	Class string `json:"class,omitempty"`
	// Reason says what classified it, e.g. "handler unrecoverable: Fatal".
	Reason string `json:"reason,omitempty"`
	// Undeclared lists the classes of Classes that the module does not
	// declare in its class tree (the host's and SDK's berth.* names aside):
	// they were classified by the chain as the guest sent it.
	Undeclared []string `json:"undeclared,omitempty"`
	// Module is the module version that ran the failing attempt
	// ("shipment-notifier v3"; empty in records written before it was kept).
	Module string `json:"module,omitempty"`
}

// Entry is one line of a record's history.
type Entry struct {
	Time    time.Time  `json:"time"`
	Action  string     `json:"action"` // attempt, parked, retry, retries-spent, retries-stopped, resume, skip, resumed
	Attempt int        `json:"attempt,omitempty"`
	Version uint64     `json:"version,omitempty"`
	Error   *ErrorInfo `json:"error,omitempty"`
	Actor   string     `json:"actor,omitempty"` // who resumed or skipped
	Reason  string     `json:"reason,omitempty"`
}

// MaxHistory bounds a record's history; older entries are dropped (the first
// entry, the park itself, is always kept).
const MaxHistory = 50

// Record is one parked aggregate of one subscription. Its JSON is the
// store's format, nobody else's: the REST API answers with a type of its own
// (api/wire's ParkedRecord, converted in package api), so a field can be
// added, renamed or re-encoded here without a client noticing.
type Record struct {
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
	State         State     `json:"state"`
	NextRetry     time.Time `json:"nextRetry,omitzero"` // zero unless State is StateRetrying
	// WaitReason says, while State is StateWaiting, why the aggregate waits
	// for an operator: WaitUnrecoverable, WaitRetriesSpent or WaitNoRetries
	// (empty in records written before it was kept, and in other states).
	WaitReason string  `json:"waitReason,omitempty"`
	History    []Entry `json:"history"`

	// InvocationKey is the key the handler was given for the event at
	// (Version, Index), kept so that retries and a resume of the record go on
	// with the key it was parked with. Empty in records written before the
	// ledger kept it: their event was delivered with the old form
	// "Processor.handler:aggregateId@version:index".
	InvocationKey string `json:"invocationKey,omitempty"`

	// Traceparent is the W3C traceparent of the last attempt at the event
	// when tracing is on ("" otherwise): the next attempt, also one made by
	// another host or after a restart, links to it.
	Traceparent string `json:"traceparent,omitempty"`
}

// Why a record waits for an operator (Record.WaitReason).
const (
	// WaitUnrecoverable: the failure was unrecoverable, so it was parked
	// without long-horizon retries, since asking again will not change the
	// answer (docs/failure-model.md, section 5);
	// subscription.parked.retry-unrecoverable opts in to them.
	WaitUnrecoverable = "unrecoverable"
	// WaitRetriesSpent: its long-horizon retries are spent.
	WaitRetriesSpent = "retries-spent"
	// WaitNoRetries: its subscription has no long-horizon retries
	// (max-retries = -1).
	WaitNoRetries = "no-retries"
)

// AddHistory appends e, keeping at most MaxHistory entries (the first kept).
func (r *Record) AddHistory(e Entry) {
	r.History = append(r.History, e)
	if n := len(r.History); n > MaxHistory {
		r.History = append(r.History[:1], r.History[n-MaxHistory+1:]...)
	}
}

// Filter selects parked records for ListParked.
type Filter struct {
	Subscription  string // empty: all
	State         State  // empty: all
	AggregateType string // empty: all
	// Class selects records whose error's class chain holds it: the class
	// itself or any class below it in the declared tree (a chain lists
	// every ancestor). Empty: all.
	Class string
	// Message selects records whose error message holds it, ignoring case.
	// Empty: all.
	Message string
	// Group selects the records of one failure group (Fingerprint).
	// Empty: all.
	Group string
	// ProvenBy selects, with Group, the records whose aggregates the proof
	// of this sha256 on the group handled (PutProof); it is checked in the
	// store, not by Matches. Empty: all.
	ProvenBy string
	// FailedAfter and FailedBefore bound the first failure: at or after
	// FailedAfter, before FailedBefore. Zero: unbounded.
	FailedAfter, FailedBefore time.Time
	After                     string // cursor from a previous page; empty: from the start
	Limit                     int    // 0 or less: DefaultLimit
	// KeyOrder lists the records in key order (subscription, aggregate
	// type, id) whatever the filter, so that Cursor of any record listed
	// continues after it; only such cursors are then accepted. Without
	// it, a time window may list its records by first failure.
	KeyOrder bool
}

// Matches reports whether r passes f's conditions on its state and failure
// (State, Class, Group, Message, FailedAfter, FailedBefore). Every backend's
// ListParked selects with it, so they agree; Subscription and AggregateType
// a backend checks on the record's key (names are any bytes, and a record's
// JSON holds only valid UTF-8).
func (f Filter) Matches(r *Record) bool {
	switch {
	case f.State != "" && r.State != f.State,
		f.Class != "" && !slices.Contains(r.Error.Classes, f.Class),
		f.Group != "" && Fingerprint(r) != f.Group,
		f.Message != "" && !containsFold(r.Error.Message, f.Message),
		!f.FailedAfter.IsZero() && r.FirstFailure.Before(f.FailedAfter),
		!f.FailedBefore.IsZero() && !r.FirstFailure.Before(f.FailedBefore):
		return false
	}
	return true
}

// containsFold reports whether sub is within s, ignoring case (Unicode
// simple folding, as strings.EqualFold).
func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// The types of Notification, in the order they happen to an aggregate.
const (
	// NotifyParked: an aggregate spent its retry budget and was parked.
	NotifyParked = "parked"
	// NotifyRetriesSpent: a parked aggregate spent its long-horizon retries
	// and waits for an operator (also when a retry stopped them because the
	// failure was unrecoverable; Reason says which).
	NotifyRetriesSpent = "retries-spent"
	// NotifyResumed: a parked aggregate was resumed.
	NotifyResumed = "resumed"
	// NotifySkipped: a parked aggregate's held events were skipped.
	NotifySkipped = "skipped"
	// NotifyPartitionPaused: a partition of a subscription paused because
	// its failures are systemic (an outage); Partition names it, Reason
	// says what the detector saw.
	NotifyPartitionPaused = "partition-paused"
	// NotifyPartitionResumed: a partition paused by an outage goes on (a
	// probe succeeded).
	NotifyPartitionResumed = "partition-resumed"
	// NotifySubscriptionPaused: an operator paused a subscription (Until
	// set when it ends on its own).
	NotifySubscriptionPaused = "subscription-paused"
	// NotifySubscriptionUnpaused: a paused subscription goes on, by an
	// operator or because its Until passed.
	NotifySubscriptionUnpaused = "subscription-unpaused"
	// NotifySubscriptionReset: an operator moved a subscription's
	// checkpoint to Position.
	NotifySubscriptionReset = "subscription-reset"
	// NotifyJobFinished: a bulk job ended; Job names it, State says how
	// (done, failed, canceled).
	NotifyJobFinished = "job-finished"
	// NotifyGroupOpened: a record parked for a cause no record of its
	// subscription was parked for: a failure group opened. Group names
	// it, Count is 1 and Error holds its masked message, classes and the
	// module version that failed. Once per group until it empties.
	NotifyGroupOpened = "group-opened"
	// NotifyGroupGrew: a failure group reached 100 records, or 1,000,
	// 10,000, … (GroupGrewAt); Count says how many. Once per threshold
	// until the group empties.
	NotifyGroupGrew = "group-grew"
)

// NotificationTypes returns every Notification type: those of an aggregate
// in the order they happen to it, then those of a partition, a
// subscription, a job and a failure group.
func NotificationTypes() []string {
	return []string{NotifyParked, NotifyRetriesSpent, NotifyResumed, NotifySkipped,
		NotifyPartitionPaused, NotifyPartitionResumed,
		NotifySubscriptionPaused, NotifySubscriptionUnpaused, NotifySubscriptionReset,
		NotifyJobFinished, NotifyGroupOpened, NotifyGroupGrew}
}

// Notification tells the outside world about a parked aggregate, a
// partition paused by an outage, an operator's change to a subscription, or
// a finished job. The fields a type does not use are empty (and left out
// of the JSON, but for the aggregate's, always present for compatibility).
type Notification struct {
	Seq           uint64     `json:"seq"`  // assigned by the store, increasing
	Type          string     `json:"type"` // one of NotificationTypes
	Time          time.Time  `json:"time"`
	Subscription  string     `json:"subscription"`
	AggregateType string     `json:"aggregateType"`
	AggregateID   string     `json:"aggregateId"`
	Version       uint64     `json:"version"`
	Error         *ErrorInfo `json:"error,omitempty"`
	Actor         string     `json:"actor,omitempty"`
	Reason        string     `json:"reason,omitempty"`
	// By says what kind of actor resumed or skipped the aggregate
	// (resumed, skipped): "operator", "job" (an operator's bulk job),
	// "long-horizon-retry" (its retry succeeded) or "outage" (the host
	// took back a park an outage's failures made).
	By string `json:"by,omitempty"`
	// Partition is the partition paused or resumed (partition-paused,
	// partition-resumed).
	Partition *int `json:"partition,omitempty"`
	// Until is when a subscription's pause ends on its own
	// (subscription-paused with an until).
	Until *time.Time `json:"until,omitempty"`
	// Position is where a reset moved the checkpoint (subscription-reset).
	Position uint64 `json:"position,omitempty"`
	// Job is the finished job's id, and JobState how it ended
	// (job-finished).
	Job      string `json:"job,omitempty"`
	JobState string `json:"jobState,omitempty"`
	// Group is the fingerprint of the failure group opened or grown, and
	// Count how many records it holds (group-opened, group-grew).
	Group string `json:"group,omitempty"`
	Count int    `json:"count,omitempty"`
}

// Store holds the ledger. Transactions are closures: a returned error rolls
// back every change made in it.
//
// Update's closure may run more than once: on a store shared by several
// hosts (ledger/jetstream), a transaction that another host's commit
// conflicted with is run again on the newer state. So the closure must have
// no effect outside its Tx — no sends, calls or changes to memory that
// outlive it — beyond what it may safely repeat; what it computes for the
// caller it should hand out only once Update returned nil.
type Store interface {
	Update(ctx context.Context, fn func(Tx) error) error
	View(ctx context.Context, fn func(Tx) error) error
	Close(ctx context.Context) error
}

// Tx is one transaction on the whole ledger: each role it is made of is one
// kind of state, and a transaction may change any of them together (a park,
// its notification and the partition's fence in one commit). A function
// that needs only one kind may take that role alone.
//
// Reads and writes fail after the transaction ended (its closure
// returned); writes fail with ErrReadOnly in a View. A malformed argument
// fails the call with ErrInvalid and leaves the transaction as it was; a
// write the store refused, a claim or fence that failed with ErrFenced, or
// a PutJob of a missing job fails the whole transaction: its commit fails
// with that error even if the closure ignored it, so a transaction never
// commits half of what it meant to.
type Tx interface {
	SubscriptionState
	Claims
	ParkedRecords
	Outbox
	Operations
	ReadModels
}
