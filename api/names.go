package api

import (
	"strconv"
	"strings"
)

// checkAddressable is the rule every aggregate type and id must meet to be
// appended: an aggregate that can be appended must be addressable
// everywhere — in a REST path, through the CLI and in the console — since
// when it fails it is parked under its type and id, and an operator must be
// able to show, resume and skip it. Never park what cannot be addressed.
// So a name is not empty, and it is not
//
//   - "." or "..": browsers (the WHATWG URL parser) remove such a path
//     segment, even percent-encoded as %2E, so no URL the console sends can
//     name it;
//   - holding U+0000 (NUL): no command line can carry it to the CLI.
//
// Every other name is allowed — "/", "%", ":", "@", "?", "#", ".a", "...",
// spaces, other control characters, any Unicode — and clients
// percent-encode it in paths (the server decodes each path parameter once,
// see decodePathParams). (JSON strings are valid UTF-8 once decoded.)
// field is the request field named in the problem.
func checkAddressable(field, name string) *Problem {
	var why string
	switch {
	case name == "":
		why = field + " is required"
	case name == "." || name == "..":
		why = field + " " + strconv.Quote(name) + ` is a dot path segment, which no browser URL can address (browsers remove it, even as %2E): an aggregate type or id must not be "." or ".."`
	case strings.IndexByte(name, 0) >= 0:
		why = field + " " + strconv.Quote(name) + " holds a NUL character, which no command line can carry to the CLI: an aggregate type or id must not hold NUL (U+0000)"
	default:
		return nil
	}
	return fieldProblem("invalid-event", field, why)
}
