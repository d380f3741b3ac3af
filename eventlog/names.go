package eventlog

import "fmt"

// CheckAggregateName enforces the rule every aggregate type and id must
// meet to be stored: an aggregate that can be appended must be addressable
// everywhere — in a REST path, through the CLI and in a browser (the
// console) — because an aggregate that fails is parked under its type and
// id, and an operator must be able to show, resume and skip it. So a name
//
//   - is not empty, and at most MaxNameLen bytes;
//   - is not "." or "..": browsers (the WHATWG URL parser) remove such a
//     path segment, even percent-encoded as %2E, so no URL a browser sends
//     can name it.
//
// Every other name is allowed — "/", "%", ":", "@", "?", "#", ".a", "...",
// spaces, control characters, any Unicode — and clients percent-encode it
// in paths. what names the field in the error (an ErrInvalid), e.g.
// "aggregate id". Append checks it; it is exported so that a front end can
// name the field at fault.
func CheckAggregateName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrInvalid, what, len(name), MaxNameLen)
	case name == "." || name == "..":
		return fmt.Errorf("%w: %s %q is a dot path segment, which no URL can address (browsers remove it): an aggregate type or id must not be \".\" or \"..\"", ErrInvalid, what, name)
	}
	return nil
}
