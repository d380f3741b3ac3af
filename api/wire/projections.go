package wire

import "encoding/json"

// ProjectionPage is a page of a projection's read model
// (GET /v1/projections/{subscription}).
type ProjectionPage struct {
	Entries []ProjectionEntry `json:"entries"`
	Next    string            `json:"next"` // the after of the next page; "" on the last
}

// ProjectionEntry is one key of a read model and its value: a JSON value as
// Value, any other as Base64; neither for an empty value.
type ProjectionEntry struct {
	Key    string          `json:"key"`
	Value  json.RawMessage `json:"value,omitempty"`  // the value, when it is JSON
	Base64 string          `json:"base64,omitempty"` // the value, when it is not JSON (standard base64)
}
