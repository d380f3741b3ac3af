package eventlog

import (
	"encoding/json"
	"fmt"
	"time"
)

// nullPayload is what an event with an empty payload is stored with.
var nullPayload = []byte("null")

// NewCommit validates req and returns the commit it asks for, without the
// Position and Version the log assigns. Every Log implementation builds its
// commits here, so that they accept and refuse the same appends: an empty
// commit is ErrEmptyCommit; a missing or too long name (MaxNameLen), a
// payload that is not one JSON value or an ExpectedVersion below AnyVersion
// is ErrInvalid (wrapped, naming the field and the event). An empty Payload
// (nil or zero length) is stored as JSON null, so that a reader always gets
// valid JSON. Time is req.Time (now when zero) in UTC without a monotonic
// reading. The Events slice is new; the payloads share memory with req's.
func NewCommit(req AppendRequest) (Commit, error) {
	if len(req.Events) == 0 {
		return Commit{}, ErrEmptyCommit
	}
	switch {
	case req.AggregateType == "":
		return Commit{}, fmt.Errorf("%w: aggregate type is empty", ErrInvalid)
	case req.AggregateID == "":
		return Commit{}, fmt.Errorf("%w: aggregate id is empty", ErrInvalid)
	case len(req.AggregateType) > MaxNameLen:
		return Commit{}, fmt.Errorf("%w: aggregate type is %d bytes, more than %d", ErrInvalid, len(req.AggregateType), MaxNameLen)
	case len(req.AggregateID) > MaxNameLen:
		return Commit{}, fmt.Errorf("%w: aggregate id is %d bytes, more than %d", ErrInvalid, len(req.AggregateID), MaxNameLen)
	case len(req.OwnerID) > MaxNameLen:
		return Commit{}, fmt.Errorf("%w: owner id is %d bytes, more than %d", ErrInvalid, len(req.OwnerID), MaxNameLen)
	case len(req.Traceparent) > MaxNameLen:
		return Commit{}, fmt.Errorf("%w: traceparent is %d bytes, more than %d", ErrInvalid, len(req.Traceparent), MaxNameLen)
	case req.ExpectedVersion < AnyVersion:
		return Commit{}, fmt.Errorf("%w: expected version %d is below AnyVersion", ErrInvalid, req.ExpectedVersion)
	}
	events := make([]Event, len(req.Events))
	for i, e := range req.Events {
		switch {
		case e.Type == "":
			return Commit{}, fmt.Errorf("%w: event %d: type is empty", ErrInvalid, i)
		case len(e.Type) > MaxNameLen:
			return Commit{}, fmt.Errorf("%w: event %d: type is %d bytes, more than %d", ErrInvalid, i, len(e.Type), MaxNameLen)
		case len(e.Payload) == 0:
			e.Payload = nullPayload
		case !json.Valid(e.Payload):
			return Commit{}, fmt.Errorf("%w: event %d (%s): payload is not valid JSON", ErrInvalid, i, e.Type)
		}
		events[i] = e
	}
	t := req.Time
	if t.IsZero() {
		t = time.Now()
	}
	return Commit{
		AggregateType: req.AggregateType,
		AggregateID:   req.AggregateID,
		OwnerID:       req.OwnerID,
		Time:          t.Round(0).UTC(),
		Events:        events,
		Traceparent:   req.Traceparent,
	}, nil
}

// CheckVersion returns nil when req may be appended to its aggregate at
// version current (ExpectedVersion is current, or AnyVersion), else
// ErrVersionConflict wrapped in an error naming the aggregate and both
// versions.
func CheckVersion(req *AppendRequest, current uint64) error {
	if req.ExpectedVersion != AnyVersion && uint64(req.ExpectedVersion) != current {
		return fmt.Errorf("%w: %s %q is at version %d, expected %d",
			ErrVersionConflict, req.AggregateType, req.AggregateID, current, req.ExpectedVersion)
	}
	return nil
}
