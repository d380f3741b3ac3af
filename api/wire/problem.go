package wire

import "fmt"

// Problem is an RFC 9457 problem document, the body of every error answer
// (Content-Type application/problem+json).
type Problem struct {
	Type   string `json:"type"`             // a URI naming the kind of problem, under https://berth.dev/problems/
	Title  string `json:"title"`            // the kind of problem, in words (the HTTP status text)
	Status int    `json:"status"`           // the HTTP status
	Detail string `json:"detail,omitempty"` // what is wrong, naming the input
	// Field names the request field or query parameter at fault, when
	// there is one.
	Field string `json:"field,omitempty"`
}

// Error is "status title: detail", so that a Problem can be returned and
// handled as an error on either side.
func (p *Problem) Error() string { return fmt.Sprintf("%d %s: %s", p.Status, p.Title, p.Detail) }

// Status is the body of an answer that only says what happened, e.g.
// {"status":"resuming"}.
type Status struct {
	Status string `json:"status"`
}

// The statuses of the operator's answers (Status.Status).
const (
	// StatusResuming answers a resume: the held events are being delivered again.
	StatusResuming = "resuming"
	// StatusSkipped answers a skip: the held events were passed over.
	StatusSkipped = "skipped"
)
