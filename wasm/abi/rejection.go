package abi

import "encoding/json"

// Rejection is the JSON payload of a berth.CommandRejected event.
type Rejection struct {
	Command   RejectedCommand `json:"command"`
	Reason    string          `json:"reason"`
	Status    int             `json:"status"`    // the gateway's HTTP status, 409 or 422
	EventType string          `json:"eventType"` // the type of the event whose handling sent the command
	RequestID string          `json:"requestId"` // <invocationKey>/<command index>
}

// RejectedCommand is the command as the saga sent it; Payload is JSON.
type RejectedCommand struct {
	AggregateType string          `json:"aggregateType"`
	AggregateID   string          `json:"aggregateId"`
	Type          string          `json:"type"`
	Payload       json.RawMessage `json:"payload"`
}
