package wire

import "time"

// AuditEntry is one state-changing call (GET /v1/audit).
type AuditEntry struct {
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Actor  string    `json:"actor"`  // the token's name
	Action string    `json:"action"` // the route, e.g. "POST /v1/subscriptions/{name}/pause"
	Target string    `json:"target"` // what it acted on
	Reason string    `json:"reason,omitempty"`
	Status int       `json:"status"`           // what the call answered
	Detail string    `json:"detail,omitempty"` // what came of it
}

// AuditPage is the answer of GET /v1/audit, oldest first.
type AuditPage struct {
	Entries []AuditEntry `json:"entries"`
	Next    string       `json:"next"` // pass as after for the next page; "" on the last
}
