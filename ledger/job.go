package ledger

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"
)

// JobState is where a bulk job stands.
type JobState string

const (
	// JobRunning: the job is working through the records it matches.
	JobRunning JobState = "running"
	// JobDone: it reached the end of what it matches.
	JobDone JobState = "done"
	// JobCancelled: an operator cancelled it; what it did stays done.
	JobCancelled JobState = "cancelled"
)

// Job actions.
const (
	JobResume = "resume"
	JobSkip   = "skip"
)

// MaxJobFailures bounds the failures a job keeps (FailuresDropped counts the
// rest).
const MaxJobFailures = 100

// JobFilter selects the parked records a job acts on: those of Filter's
// conditions, in every subscription of Subscriptions (empty: all).
type JobFilter struct {
	Subscriptions []string `json:"subscriptions,omitempty"`
	State         State    `json:"state,omitempty"`
	AggregateType string   `json:"aggregateType,omitempty"`
	Class         string   `json:"class,omitempty"`
	Message       string   `json:"message,omitempty"`
	Group         string   `json:"group,omitempty"`
	// Proven, with Group, acts only on the aggregates the proof of this
	// candidate on the group handled.
	Proven       *JobProof `json:"proven,omitempty"`
	FailedAfter  time.Time `json:"failedAfter,omitzero"`
	FailedBefore time.Time `json:"failedBefore,omitzero"`
}

// Filter is the ledger.Filter of one subscription's page of the job's
// records (empty subscription: every subscription).
func (f JobFilter) Filter(subscription, after string, limit int) Filter {
	return Filter{Subscription: subscription, State: f.State, AggregateType: f.AggregateType, Class: f.Class,
		Message: f.Message, Group: f.Group, ProvenBy: f.Proven.sha(), FailedAfter: f.FailedAfter, FailedBefore: f.FailedBefore, After: after, Limit: limit,
		KeyOrder: true}
}

// JobProof names the proof a job's filter holds to: a candidate module
// and the SHA-256 of its bytes.
type JobProof struct {
	Module string `json:"module"`
	SHA256 string `json:"sha256"`
}

func (p *JobProof) sha() string {
	if p == nil {
		return ""
	}
	return p.SHA256
}

// JobFailure is one record a job could not act on.
type JobFailure struct {
	Time          time.Time `json:"time"`
	Subscription  string    `json:"subscription"`
	AggregateType string    `json:"aggregateType"`
	AggregateID   string    `json:"aggregateId"`
	Error         string    `json:"error"`
}

// JobCursor is how far a job got: the index in its subscriptions (all of
// them: 0) and the ListParked cursor within it.
type JobCursor struct {
	Subscription int    `json:"subscription"`
	After        string `json:"after,omitempty"`
}

// Job is a bulk resume or skip of the parked records a filter matches, kept
// in the ledger so that it survives a restart. Its JSON is the store's
// format; the REST API answers with a type of its own.
type Job struct {
	ID      uint64    `json:"id"` // assigned by CreateJob, increasing
	Action  string    `json:"action"`
	Filter  JobFilter `json:"filter"`
	Actor   string    `json:"actor"`
	Reason  string    `json:"reason"`
	Rate    float64   `json:"rate"` // records a second at most
	State   JobState  `json:"state"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Finished is when it became done or cancelled.
	Finished time.Time `json:"finished,omitzero"`
	// Matched is how many records the filter matched when the job was
	// created.
	Matched int `json:"matched"`
	// Done and Failed count the records acted on and those that failed;
	// Gone those that left the ledger before the job reached them (resolved
	// by someone else, or by a retry).
	Done            int          `json:"done"`
	Failed          int          `json:"failed"`
	Gone            int          `json:"gone"`
	Failures        []JobFailure `json:"failures,omitempty"`
	FailuresDropped int          `json:"failuresDropped,omitempty"`
	Cursor          JobCursor    `json:"cursor"`
	// InFlight is the batch of records the job was acting on when it last
	// wrote its progress: written before the actions and cleared after
	// them, so a job that goes on after a crash knows to count (or redo)
	// those records.
	InFlight []JobItem `json:"inFlightBatch,omitempty"`
	// InFlightOne is the one record in flight as jobs written before
	// batches keep it; a job that goes on settles it with InFlight.
	InFlightOne *JobItem `json:"inFlight,omitempty"`
	// Stopped says why the host ended the job itself, cancelled by no
	// operator: a proven job whose candidate stopped being the module
	// version deployed. Empty otherwise.
	Stopped string `json:"stopped,omitempty"`
}

// JobItem names the record a job is acting on.
type JobItem struct {
	Subscription  string `json:"subscription"`
	AggregateType string `json:"aggregateType"`
	AggregateID   string `json:"aggregateId"`
}

// AddFailure keeps f, at most MaxJobFailures of them.
func (j *Job) AddFailure(f JobFailure) {
	j.Failed++
	if len(j.Failures) < MaxJobFailures {
		j.Failures = append(j.Failures, f)
	} else {
		j.FailuresDropped++
	}
}

// Operations keeps what operators do through the API: the bulk jobs they
// start (kept so that a job survives a restart) and the audit log of every
// state-changing call.
type Operations interface {
	// CreateJob stores j under the next job id, which it sets in j.ID. A
	// job of an unknown Action, State or filter State, or a Rate not above
	// 0, is ErrInvalid.
	CreateJob(j *Job) error
	// PutJob replaces a stored job; ErrNotFound if there is none, which
	// fails the transaction. It validates j as CreateJob does.
	PutJob(j *Job) error
	// Job returns one job, ErrNotFound if there is none.
	Job(id uint64) (*Job, error)
	// ListJobs returns up to limit (DefaultLimit when 0 or less) jobs with
	// ids above after, oldest first.
	ListJobs(after uint64, limit int) ([]*Job, error)

	// Audit appends e to the audit log under the next Seq (e.Seq is
	// ignored; a zero Time is set to now; the Action must not be empty).
	Audit(e AuditEntry) error
	// AuditLog returns up to limit (DefaultLimit when 0 or less) entries
	// with Seq above after, oldest first.
	AuditLog(after uint64, limit int) ([]AuditEntry, error)
	// SweepAudit removes up to limit (DefaultLimit when 0 or less) of the
	// oldest entries, in Seq order, as long as their Time is before before,
	// and reports whether more such remain. Call it in transactions of its
	// own until it reports none.
	SweepAudit(before time.Time, limit int) (more bool, err error)
}

func jobKey(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte{kindJob}, id) }
func jobSeqKey() []byte       { return []byte("xjob-seq") }

func validJob(j *Job) error {
	switch {
	case j.Action != JobResume && j.Action != JobSkip:
		return fmt.Errorf("%w: job action %q (want resume or skip)", ErrInvalid, j.Action)
	case j.State != JobRunning && j.State != JobDone && j.State != JobCancelled:
		return fmt.Errorf("%w: job state %q", ErrInvalid, j.State)
	case j.Filter.State != "" && !validState(j.Filter.State):
		return fmt.Errorf("%w: job filter state %q", ErrInvalid, j.Filter.State)
	case !(j.Rate > 0):
		return fmt.Errorf("%w: job rate %v must be above 0", ErrInvalid, j.Rate)
	}
	return nil
}

// CreateJob implements [Operations.CreateJob].
func (t *kvTx) CreateJob(j *Job) error {
	const op = "CreateJob"
	if err := t.checkWrite(op); err != nil {
		return err
	}
	if err := validJob(j); err != nil {
		return err
	}
	last, _, err := t.getUint64(jobSeqKey())
	if err != nil {
		return t.fail(op, err)
	}
	j.ID = last + 1
	if err := t.putJob(op, j); err != nil {
		return err
	}
	return t.set(op, jobSeqKey(), u64(j.ID))
}

// PutJob implements [Operations.PutJob].
func (t *kvTx) PutJob(j *Job) error {
	const op = "PutJob"
	if err := t.checkWrite(op); err != nil {
		return err
	}
	if err := validJob(j); err != nil {
		return err
	}
	if _, err := t.get(jobKey(j.ID)); err != nil {
		return t.fail(op, fmt.Errorf("job %d: %w", j.ID, err))
	}
	return t.putJob(op, j)
}

func (t *kvTx) putJob(op string, j *Job) error {
	v, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, op, err)
	}
	return t.set(op, jobKey(j.ID), v)
}

// Job implements [Operations.Job].
func (t *kvTx) Job(id uint64) (*Job, error) {
	if err := t.checkRead("Job"); err != nil {
		return nil, err
	}
	v, err := t.get(jobKey(id))
	if err != nil {
		return nil, fmt.Errorf("ledger: job %d: %w", id, err)
	}
	j := new(Job)
	if err := json.Unmarshal(v, j); err != nil {
		return nil, fmt.Errorf("ledger: corrupt job %d: %w", id, err)
	}
	return j, nil
}

// ListJobs implements [Operations.ListJobs].
func (t *kvTx) ListJobs(after uint64, limit int) ([]*Job, error) {
	if err := t.checkRead("ListJobs"); err != nil {
		return nil, err
	}
	limit = limitOr(limit)
	if after == ^uint64(0) {
		return nil, nil
	}
	var out []*Job
	err := t.scan([]byte{kindJob}, jobKey(after+1), func(k, v []byte) (bool, error) {
		j := new(Job)
		if err := json.Unmarshal(v, j); err != nil {
			return false, fmt.Errorf("corrupt job %q: %w", k, err)
		}
		out = append(out, j)
		return len(out) < limit, nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: ListJobs: %w", err)
	}
	return out, nil
}
