package wire

import (
	"encoding/json"
	"time"
)

// AppendRequest is the body of POST /v1/events: one commit to append.
type AppendRequest struct {
	AggregateType string `json:"aggregateType"`
	AggregateID   string `json:"aggregateId"`
	// ExpectedVersion is the version the aggregate must be at (0: it must
	// have no events); nil: any version.
	ExpectedVersion *int64       `json:"expectedVersion,omitempty"`
	OwnerID         string       `json:"ownerId,omitempty"`
	Events          []EventInput `json:"events"`
}

// EventInput is one event of an AppendRequest.
type EventInput struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"` // any JSON value; left out or empty: null
}

// AppendResult is the answer of POST /v1/events.
type AppendResult struct {
	AggregateType string `json:"aggregateType"`
	AggregateID   string `json:"aggregateId"`
	Version       uint64 `json:"version"`  // the aggregate's version after the commit
	Position      uint64 `json:"position"` // the commit's global position in the log
}

// BatchAppendRequest is the body of POST /v1/events/batch: many commits,
// each to append on its own (atomic per commit, never across them), under
// as few fsyncs as the log can share.
type BatchAppendRequest struct {
	Appends []AppendRequest `json:"appends"`
}

// BatchAppendResult is the answer of POST /v1/events/batch: one result per
// append, in the request's order.
type BatchAppendResult struct {
	Appended int               `json:"appended"` // results with status 201
	Failed   int               `json:"failed"`   // the others
	Results  []BatchAppendItem `json:"results"`
}

// BatchAppendItem is what became of one append of a batch: status 201 with
// its version and position, or the status and problem POST /v1/events would
// have answered (409 version-conflict, …).
type BatchAppendItem struct {
	Status        int      `json:"status"`
	AggregateType string   `json:"aggregateType"`
	AggregateID   string   `json:"aggregateId"`
	Version       uint64   `json:"version,omitempty"`  // after the commit (201 only)
	Position      uint64   `json:"position,omitempty"` // the commit's position (201 only)
	Problem       *Problem `json:"problem,omitempty"`  // why it was not appended (not 201)
}

// Commit is one commit of an aggregate's stream.
type Commit struct {
	Position      uint64    `json:"position"`
	AggregateType string    `json:"aggregateType"`
	AggregateID   string    `json:"aggregateId"`
	Version       uint64    `json:"version"`
	OwnerID       string    `json:"ownerId,omitempty"`
	Time          time.Time `json:"time"`
	Events        []Event   `json:"events"`
}

// Event is one event of a commit, as appended.
type Event struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"` // the payload (null when none)
}

// CommitList is the answer of GET /v1/aggregates/{type}/{id}/events.
type CommitList struct {
	Commits []Commit `json:"commits"`
}
