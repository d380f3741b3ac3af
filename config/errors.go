package config

import (
	"errors"
	"fmt"
	"strings"
)

// Error is one problem with a configuration: a syntax error, an unknown key or a bad value. Parse and
// Load return every problem they find, joined with [errors.Join]; each is an *Error (use errors.As, or
// [Errors] to get them all). A problem found by [Config.Validate] on a Config that was not parsed has no
// File and no Line.
type Error struct {
	// File is the name of the file (as given to Parse or Load); empty when the Config was not parsed.
	File string
	// Line is the 1-based line the key is on (or the line of its table when the key is missing); 0 when
	// unknown.
	Line int
	// Key is the full dotted key, e.g. "subscription.retry.max-attempts", `subscriptions."A.b".retry.timeout`
	// or "webhooks[1].url" (array elements are numbered from 0); empty for a syntax error.
	Key string
	// Value is the offending value as written in TOML, e.g. `"2 parsecs"`; empty when it does not apply.
	Value string
	// Problem says what is wrong.
	Problem string
	// Unknown is set when the key itself is unknown (a typo or a key of another version).
	Unknown bool
}

// Error renders the problem as `file:line: key: value: problem`, e.g.
// `berth.toml:7: subscription.retry.initial-backoff: "2 parsecs": unknown unit "parsecs" ...` or
// `berth.toml:12: unknown key subscription.retry.max-atempts (did you mean max-attempts?)`; parts that
// are not known are left out.
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		b.WriteString(e.File + ": ")
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Unknown {
		b.WriteString("unknown key " + e.Key)
		if e.Problem != "" {
			b.WriteString(" (" + e.Problem + ")")
		}
		return b.String()
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	if e.Value != "" {
		b.WriteString(e.Value + ": ")
	}
	b.WriteString(e.Problem)
	return b.String()
}

// Errors returns the *Error values in err (a single one, or those joined by Parse, Load or Validate), in
// order. Errors that are not *Error (e.g. a file that cannot be read) are left out.
func Errors(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if e, ok := err.(*Error); ok {
			out = append(out, e)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var e *Error
		if errors.As(err, &e) {
			out = append(out, e)
		}
	}
	walk(err)
	return out
}

// problems collects *Error values with their keys; lines are attached when the text is known.
type problems []*Error

func (p *problems) add(key keyPath, value, format string, args ...any) {
	*p = append(*p, &Error{Key: key.String(), Value: value, Problem: fmt.Sprintf(format, args...)})
}

// join returns the problems as one error (nil when there are none).
func (p problems) join() error {
	if len(p) == 0 {
		return nil
	}
	errs := make([]error, len(p))
	for i, e := range p {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// hasKeyOrChild reports whether a problem was already reported for key or a key under it.
func (p problems) hasKeyOrChild(key string) bool {
	for _, e := range p {
		if e.Key == key || strings.HasPrefix(e.Key, key+".") || strings.HasPrefix(e.Key, key+"[") {
			return true
		}
	}
	return false
}
