// Package ledger is Berth's durable failure ledger: the parked aggregates of
// every subscription, the subscriptions' checkpoints and state, and the
// outbox of notifications about parking, all in one store so that a change to
// any of them is one transaction. The embedded implementation keeps it in
// Badger; no Badger type leaves this package.
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
	// FailedAfter and FailedBefore bound the first failure: at or after
	// FailedAfter, before FailedBefore. Zero: unbounded.
	FailedAfter, FailedBefore time.Time
	After                     string // cursor from a previous page; empty: from the start
	Limit                     int    // 0: 100
}

// Matches reports whether r passes f's conditions on its state and failure
// (State, Class, Message, FailedAfter, FailedBefore). Every backend's
// ListParked selects with it, so they agree; Subscription and AggregateType
// a backend checks on the record's key (names are any bytes, and a record's
// JSON holds only valid UTF-8).
func (f Filter) Matches(r *Record) bool {
	switch {
	case f.State != "" && r.State != f.State,
		f.Class != "" && !slices.Contains(r.Error.Classes, f.Class),
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
)

// NotificationTypes returns every Notification type, in the order they
// happen to an aggregate.
func NotificationTypes() []string {
	return []string{NotifyParked, NotifyRetriesSpent, NotifyResumed, NotifySkipped}
}

// Notification tells the outside world about a parked aggregate.
type Notification struct {
	Seq           uint64     `json:"seq"`  // assigned by the store, increasing
	Type          string     `json:"type"` // parked, retries-spent, resumed, skipped
	Time          time.Time  `json:"time"`
	Subscription  string     `json:"subscription"`
	AggregateType string     `json:"aggregateType"`
	AggregateID   string     `json:"aggregateId"`
	Version       uint64     `json:"version"`
	Error         *ErrorInfo `json:"error,omitempty"`
	Actor         string     `json:"actor,omitempty"`
	Reason        string     `json:"reason,omitempty"`
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

// Tx is one transaction. Read-only transactions (View) fail on writes.
type Tx interface {
	// Checkpoint returns the subscription's checkpoint: every commit below it
	// was handled (or held for a parked aggregate). 0 when none is stored.
	Checkpoint(subscription string) (uint64, bool, error)
	SetCheckpoint(subscription string, position uint64) error
	// PartitionCheckpoint returns the checkpoint of one partition of the
	// subscription (partition from 0): every commit of that partition below
	// it was handled or held. Partitions move between hosts, so each keeps
	// its own; the subscription's Checkpoint is kept beside them. 0, false
	// when none is stored.
	PartitionCheckpoint(subscription string, partition int) (uint64, bool, error)
	// SetPartitionCheckpoint stores one partition's checkpoint, replacing
	// any. partition must not be negative.
	SetPartitionCheckpoint(subscription string, partition int, position uint64) error

	// PartitionOwner returns the host that last claimed the partition and
	// the epoch of its claim ("", 0 when none has).
	PartitionOwner(subscription string, partition int) (host string, epoch uint64, err error)
	// ClaimPartition makes host the partition's owner at epoch, which must
	// be greater than the stored epoch (ErrFenced otherwise: someone claimed
	// it since). A host that takes a partition over claims it before it
	// writes anything for it.
	ClaimPartition(subscription string, partition int, host string, epoch uint64) error
	// Fence fails the transaction with ErrFenced (and fails its commit, even
	// if the closure ignores the error) unless host at epoch is the
	// partition's owner. A host calls it in every transaction it writes for
	// a partition, so that one that lost the partition cannot write for it:
	// on a store shared by several hosts, a claim that commits first makes
	// every later commit fenced by the old epoch fail.
	Fence(subscription string, partition int, host string, epoch uint64) error

	// DutyHolder returns the host that last claimed the duty (work one host
	// of a deployment at a time does: the jobs, the webhooks) and the epoch
	// of its claim ("", 0 when none has).
	DutyHolder(duty string) (host string, epoch uint64, err error)
	// ClaimDuty makes host the duty's holder at epoch, which must be greater
	// than the stored epoch (ErrFenced otherwise). A host that takes a duty
	// over claims it before its work writes anything.
	ClaimDuty(duty, host string, epoch uint64) error
	// FenceDuty fails the transaction with ErrFenced (and fails its commit,
	// even if the closure ignores the error) unless host at epoch holds the
	// duty: the duty's work calls it (DutyFence.Check) in every transaction
	// it writes, so a host whose duty moved on cannot act for it.
	FenceDuty(duty, host string, epoch uint64) error

	// CreateJob stores a new bulk job under the next id (it sets j.ID).
	CreateJob(j *Job) error
	// PutJob replaces a stored job, ErrNotFound if there is none.
	PutJob(j *Job) error
	// Job returns one job, ErrNotFound if there is none.
	Job(id uint64) (*Job, error)
	// ListJobs returns up to limit (DefaultLimit when 0 or less) jobs with
	// ids above after, oldest first.
	ListJobs(after uint64, limit int) ([]*Job, error)

	// Audit appends an entry to the audit log (Seq assigned).
	Audit(e AuditEntry) error
	// AuditLog returns up to limit entries with Seq above after, oldest
	// first.
	AuditLog(after uint64, limit int) ([]AuditEntry, error)
	// SweepAudit removes up to limit of the oldest entries from before
	// before, and reports whether more remain.
	SweepAudit(before time.Time, limit int) (more bool, err error)

	// ListResolved returns a page of the records DeleteParked kept when
	// their aggregates were resolved, and the cursor of the next page.
	ListResolved(f ResolvedFilter) ([]*Resolved, string, error)
	// SweepResolved removes up to limit of the records resolved before
	// before, and reports whether more remain.
	SweepResolved(before time.Time, limit int) (more bool, err error)

	// Meta reads and writes small per-subscription state (paused, …).
	Meta(subscription, key string) ([]byte, error) // ErrNotFound
	SetMeta(subscription, key string, value []byte) error
	// DeleteMeta removes a value; removing what is not there is no error.
	DeleteMeta(subscription, key string) error

	// Parked returns one record, ErrNotFound if the aggregate is not parked.
	Parked(subscription, aggregateType, aggregateID string) (*Record, error)
	PutParked(r *Record) error
	// DeleteParked removes a record, its aggregate being resolved, and
	// keeps it among the resolved records (ListResolved) until the
	// retention sweeps it.
	DeleteParked(subscription, aggregateType, aggregateID string) error
	// ListParked returns a page of records in key order and the cursor of the
	// next page ("" at the end).
	ListParked(f Filter) ([]*Record, string, error)
	// CountParked counts a subscription's records by state.
	CountParked(subscription string) (map[State]int, error)

	// Notify queues a notification in the outbox (Seq assigned).
	Notify(n Notification) error
	// Notifications returns queued notifications with Seq > after.
	Notifications(after uint64, limit int) ([]Notification, error)
	// AckNotifications removes notifications with Seq <= through.
	AckNotifications(through uint64) error

	// ProjectionGet returns a copy of the value under key in the
	// subscription's read model (a projection's key/value namespace),
	// ErrNotFound if there is none.
	ProjectionGet(subscription, key string) ([]byte, error)
	// ProjectionPut stores value under key in the subscription's read model,
	// replacing any; nil is stored as an empty value. The key must not be
	// empty.
	ProjectionPut(subscription, key string, value []byte) error
	// ProjectionDelete removes key from the subscription's read model;
	// deleting a missing key is no error.
	ProjectionDelete(subscription, key string) error
	// ProjectionList returns up to limit (DefaultLimit when 0 or less)
	// entries of the subscription's read model whose keys start with prefix
	// and sort after the key after (empty: from the first), in key (byte)
	// order, and the key to pass as after for the next page ("" at the end).
	ProjectionList(subscription, prefix, after string, limit int) ([]ProjectionEntry, string, error)
	// ClearProjection empties the subscription's read model and forgets its
	// applied markers, atomically with the rest of the transaction however
	// large the read model is: the namespace moves to a new generation at
	// once, and the old one's keys are removed later by SweepProjections.
	ClearProjection(subscription string) error
	// SweepProjections removes up to limit (DefaultLimit when 0 or less) keys
	// of read models that ClearProjection retired, and reports whether any
	// remain. Call it in transactions of its own until it reports none, so
	// that no transaction grows past the store's limit.
	SweepProjections(limit int) (more bool, err error)
	// Applied returns the last event (commit version and index within it)
	// of the aggregate applied to the subscription's read model; ok is false
	// when none was.
	Applied(subscription, aggregateType, aggregateID string) (version uint64, index uint32, ok bool, err error)
	// SetApplied records the last event of the aggregate applied to the
	// subscription's read model, replacing any.
	SetApplied(subscription, aggregateType, aggregateID string, version uint64, index uint32) error
}

// ProjectionEntry is one key and value of a read model.
type ProjectionEntry struct {
	Key   string
	Value []byte
}
