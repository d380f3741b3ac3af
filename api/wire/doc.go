// Package wire holds the bodies of Berth's REST API (/v1) as Go types:
// what the host sends and accepts, and what a client such as the `berth`
// CLI (cmd/host) decodes. openapi.json describes the same documents; a test
// in package api checks every type here against its schema of the same name.
//
// The types are the API's own, not the host's: the ledger's records on disk,
// the registry's modules and the engine's status have types of their own, and
// package api converts them to these. So the disk format can change without
// breaking a client, and the API can change only on purpose. The package
// imports nothing of the host's (only the standard library), so that a Go
// client can use it alone.
//
// The catalogue of problem types (ProblemStatus, ProblemNames) is here too:
// the server sends only its types, and a client reads a problem by its type.
//
// Times are RFC 3339 with nanoseconds (time.Time's JSON); a field marked
// omitempty or omitzero is left out when it is empty, which openapi.json
// says by leaving it out of the schema's required list.
package wire
