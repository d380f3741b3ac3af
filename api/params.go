package api

import (
	"bytes"
	"errors"
	"io"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"
)

// decodePathParams is the one owner of path parameter decoding: after it,
// c.Param is the decoded value, decoded exactly once, on every route.
//
// echo routes on the request's raw (escaped) path when it has one
// (URL.RawPath, set when the path holds an escape the decoded form cannot
// round-trip, like %2F) and on the decoded URL.Path otherwise; so its
// parameters are escaped in the first case and already decoded in the
// second. Using them as they come would let a skip of "a/b" (sent as a%2Fb)
// end the record of the aggregate "a%2Fb"; unescaping them again when they
// are decoded would let a%252Fb reach "a/b". Here they are unescaped only
// when echo routed on the raw path.
//
// A decoded parameter that is not valid UTF-8 (%FF) is a 400 naming it:
// no module, subscription, aggregate type or id can have such a name (they
// come from JSON, or are ASCII), so a 404 would answer for a name the
// client did not send, shown with U+FFFD in its JSON. A projection's key
// is the exception: it is whatever bytes its guest chose.
func decodePathParams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		names, values := c.ParamNames(), c.ParamValues()
		if c.Request().URL.RawPath != "" { // else routed on the decoded path: the parameters are decoded
			decoded := make([]string, len(values))
			for i, v := range values {
				u, err := url.PathUnescape(v)
				if err != nil { // net/url keeps a RawPath only when it is validly escaped
					return badRequest("invalid-path", "path parameter %s is not validly percent-encoded: %v", names[i], err)
				}
				decoded[i] = u
			}
			c.SetParamValues(decoded...)
			values = decoded
		}
		for i, v := range values {
			if names[i] != "key" && !utf8.ValidString(v) {
				p := badRequest("invalid-path", "path parameter %s (%s) is not valid UTF-8 once decoded, so it names nothing here", names[i], strconv.QuoteToASCII(v))
				p.Field = names[i]
				return p
			}
		}
		return next(c)
	}
}

// The request bodies' JSON is read by one decoder, encoding/json/v2's
// (github.com/go-json-experiment/json, the implementation the standard
// library's v2 comes from), not by encoding/json's: v1 takes the last of a
// key given twice, matches keys without regard to case (so "aggregateID"
// after "aggregateId" overrode it too) and turns invalid UTF-8 and lone
// UTF-16 surrogate escapes ("\ud800") into U+FFFD — each a value changed
// behind the client's back, an aggregate id among them. v2 refuses all of
// them, at any depth of the body (an event's data included), and says
// where.

// jsonSpace is JSON's whitespace (RFC 8259): what may follow a body's value.
const jsonSpace = " \t\r\n"

// decodeJSON reads a JSON body strictly into v: exactly one JSON value,
// then only whitespace; a key given twice, a key v has no field for (in
// the exact case of its name), a value of the wrong type and a string that
// is not valid Unicode are 400s naming the problem and the field; a body
// that breaks off is a 400, one past server.max-body-size a 413.
func decodeJSON(c echo.Context, v any) error { return decodeBody(c, v, false) }

// decodeOptionalJSON is decodeJSON for a body that may be left out: an
// empty body (with or without a Content-Length) leaves v as it is.
func decodeOptionalJSON(c echo.Context, v any) error { return decodeBody(c, v, true) }

func decodeBody(c echo.Context, v any, optional bool) error {
	// The whole body is read first (it is capped, see limitBody): one that
	// breaks off anywhere, even after a whole value, is the client's fault
	// and must stop the request before it acts.
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return bodyReadError(err)
	}
	if len(bytes.TrimLeft(body, jsonSpace)) == 0 {
		if optional {
			return nil
		}
		return badRequest("invalid-json", "the request body is empty; it must be a JSON object")
	}
	// The syntax first, on its own: v2's decoder reports the place of a
	// key given twice or a bad string inside a value it hands to an
	// UnmarshalJSON method (an event's data, a json.RawMessage) with a name
	// missing from the pointer, once an earlier string of the object was
	// long enough; reading the value as JSON text alone gets it right.
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	value, err := dec.ReadValue()
	if err != nil {
		return jsonProblem(err, body)
	}
	if rest := bytes.TrimLeft(body[dec.InputOffset():], jsonSpace); len(rest) > 0 {
		return badRequest("invalid-json", "the request body has data after its JSON object (%q): it must be one JSON value, then only whitespace", rest[0])
	}
	if err := jsonv2.Unmarshal(value, v, jsonv2.RejectUnknownMembers(true)); err != nil {
		return jsonProblem(err, body)
	}
	return nil
}

// jsonProblem is the 400 of a body that does not decode.
func jsonProblem(err error, body []byte) *Problem {
	var syn *jsontext.SyntacticError
	var sem *jsonv2.SemanticError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("invalid-json", "the request body ends in the middle of its JSON object")
	case errors.As(err, &syn) && errors.Is(syn.Err, jsontext.ErrDuplicateName):
		name, in := syn.JSONPointer.LastToken(), ""
		if parent := syn.JSONPointer.Parent(); parent != "" {
			in = " in " + fieldName(parent)
		}
		return invalidJSON(fieldName(syn.JSONPointer), "key %q appears twice%s: a key may appear only once in a JSON object", name, in)
	case errors.As(err, &syn) && invalidUnicode(body, syn.ByteOffset):
		at := "a string of the request body"
		if syn.JSONPointer != "" {
			at = "the string at " + fieldName(syn.JSONPointer)
		}
		return invalidJSON(fieldName(syn.JSONPointer), "%s is not valid Unicode (%v): JSON strings must be valid UTF-8, and a \\uD800-\\uDFFF escape must be one half of a surrogate pair; "+
			"the host refuses such a string rather than change it to U+FFFD", at, syn.Err)
	case errors.As(err, &syn):
		return badRequest("invalid-json", "malformed JSON at byte %d: %v", syn.ByteOffset, syn.Err)
	case errors.As(err, &sem) && errors.Is(sem.Err, jsonv2.ErrUnknownName):
		in := ""
		if parent := sem.JSONPointer.Parent(); parent != "" {
			in = " in " + fieldName(parent)
		}
		return invalidJSON(fieldName(sem.JSONPointer), "unknown field %q%s (field names are case-sensitive)", sem.JSONPointer.LastToken(), in)
	case errors.As(err, &sem) && sem.JSONPointer == "" && sem.GoType != nil:
		return badRequest("invalid-json", "the request body must be a JSON object, not %s", kindName(sem.JSONKind))
	case errors.As(err, &sem) && sem.GoType != nil:
		got := kindName(sem.JSONKind)
		if sem.JSONKind == '0' && len(sem.JSONValue) > 0 {
			got += " " + string(sem.JSONValue)
		}
		if errors.Is(sem.Err, strconv.ErrRange) {
			got += ", which is out of range"
		}
		return invalidJSON(fieldName(sem.JSONPointer), "field %s must be %s, not %s", fieldName(sem.JSONPointer), jsonType(sem.GoType), got)
	}
	return badRequest("invalid-json", "%v", err)
}

// invalidUnicode reports whether a body that failed to decode at offset
// failed for a string that is not valid Unicode: read again with invalid
// UTF-8 allowed (and keys given twice, whose errors come first), it is
// valid, or fails only later.
func invalidUnicode(body []byte, offset int64) bool {
	lenient := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
	_, err := lenient.ReadValue()
	var syn *jsontext.SyntacticError
	return err == nil || errors.As(err, &syn) && syn.ByteOffset > offset
}

func invalidJSON(field, format string, args ...any) *Problem {
	p := badRequest("invalid-json", format, args...)
	p.Field = field
	return p
}

// fieldName writes a JSON pointer (RFC 6901) as the API names fields:
// events[0].type for /events/0/type. A token of digits is taken for an
// array index: the request types have no such field names, and within an
// event's data, which is any JSON, the detail quotes the key.
func fieldName(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.ParseUint(tok, 10, 64); err == nil {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// kindName names a JSON kind as a client wrote it.
func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	}
	return "another kind of value"
}

// bodyReadError is the problem of a request body that could not be read:
// 413 past its cap (the *Problem of limitBody's reader), else 400 — a
// malformed chunk or a body shorter than its Content-Length is the
// client's fault, never a 500.
func bodyReadError(err error) error {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	return badRequest("broken-body", "the request body could not be read to its end: %v", err)
}

// jsonType names the JSON type a Go type decodes from.
func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer of 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Pointer:
		return jsonType(t.Elem())
	}
	return t.String()
}
