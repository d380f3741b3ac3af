package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/eventlog"
	"github.com/labstack/echo/v4"
)

func (s *Server) appendEvents(c echo.Context) error {
	var req wire.AppendRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	// Names no client can address are refused here, before they could be parked.
	if p := checkAddressable("aggregateType", req.AggregateType); p != nil {
		return p
	}
	if p := checkAddressable("aggregateId", req.AggregateID); p != nil {
		return p
	}
	if len(req.Events) == 0 {
		return &Problem{Type: "https://berth.dev/problems/invalid-event", Title: "Bad Request", Status: 400, Detail: "events must hold at least one event", Field: "events"}
	}
	ar := eventlog.AppendRequest{AggregateType: req.AggregateType, AggregateID: req.AggregateID,
		ExpectedVersion: eventlog.AnyVersion, OwnerID: req.OwnerID}
	if req.ExpectedVersion != nil {
		if *req.ExpectedVersion < 0 {
			return &Problem{Type: "https://berth.dev/problems/invalid-event", Title: "Bad Request", Status: 400, Detail: "expectedVersion must be 0 or more", Field: "expectedVersion"}
		}
		ar.ExpectedVersion = *req.ExpectedVersion
	}
	for i, e := range req.Events {
		if e.Type == "" {
			return &Problem{Type: "https://berth.dev/problems/invalid-event", Title: "Bad Request", Status: 400, Detail: "events[" + strconv.Itoa(i) + "].type is required", Field: "events[" + strconv.Itoa(i) + "].type"}
		}
		data := []byte(e.Data)
		if len(data) == 0 {
			data = []byte("null")
		}
		ar.Events = append(ar.Events, eventlog.Event{Type: e.Type, Payload: data})
	}
	commit, err := s.deps.Log.Append(c.Request().Context(), ar)
	switch {
	case errors.Is(err, eventlog.ErrVersionConflict):
		return problem(http.StatusConflict, "version-conflict", err.Error())
	case errors.Is(err, eventlog.ErrInvalid), errors.Is(err, eventlog.ErrEmptyCommit):
		return badRequest("invalid-event", "%v", err)
	case err != nil:
		return err
	}
	s.deps.Metrics.eventsAppended.Add(float64(len(commit.Events)))
	return c.JSON(http.StatusCreated, wire.AppendResult{AggregateType: commit.AggregateType,
		AggregateID: commit.AggregateID, Version: commit.Version, Position: commit.Position})
}

func (s *Server) aggregateEvents(c echo.Context) error {
	from := uint64(1)
	if v := c.QueryParam("from"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return &Problem{Type: "https://berth.dev/problems/invalid-query", Title: "Bad Request", Status: 400, Detail: "from must be a version number, got " + strconv.Quote(v), Field: "from"}
		}
		from = n
	}
	limit, err := queryLimit(c, 100, 1000)
	if err != nil {
		return err
	}
	commits, err := s.deps.Log.ReadAggregate(c.Request().Context(), c.Param("type"), c.Param("id"), from, limit)
	if err != nil {
		return err
	}
	if len(commits) == 0 {
		v, err := s.deps.Log.Version(c.Request().Context(), c.Param("type"), c.Param("id"))
		if err != nil {
			return err
		}
		if v == 0 {
			return notFound("aggregate %s/%s has no events", c.Param("type"), c.Param("id"))
		}
	}
	out := wire.CommitList{Commits: make([]wire.Commit, len(commits))}
	for i, cm := range commits {
		out.Commits[i] = toWireCommit(cm)
	}
	return c.JSON(http.StatusOK, out)
}

func queryLimit(c echo.Context, def, maxLimit int) (int, error) {
	v := c.QueryParam("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, &Problem{Type: "https://berth.dev/problems/invalid-query", Title: "Bad Request", Status: 400,
			Detail: "limit must be a number from 1 to " + strconv.Itoa(maxLimit) + ", got " + strconv.Quote(v), Field: "limit"}
	}
	return n, nil
}

// decodeJSON reads a JSON body strictly: unknown fields, trailing data and
// wrong types are 400s naming the problem (and the field, when there is one).
func decodeJSON(c echo.Context, v any) error { return decodeBody(c, v, false) }

// decodeOptionalJSON is decodeJSON for a body that may be left out: an
// empty body (with or without a Content-Length) leaves v as it is.
func decodeOptionalJSON(c echo.Context, v any) error { return decodeBody(c, v, true) }

func decodeBody(c echo.Context, v any, optional bool) error {
	dec := json.NewDecoder(c.Request().Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *Problem // limitBody's, past the cap
		var typeErr *json.UnmarshalTypeError
		var syntaxErr *json.SyntaxError
		switch {
		case errors.As(err, &tooBig):
			return tooBig
		case errors.As(err, &typeErr) && typeErr.Field == "":
			return badRequest("invalid-json", "the request body must be a JSON object, not %s", typeErr.Value)
		case errors.As(err, &typeErr):
			return &Problem{Type: "https://berth.dev/problems/invalid-json", Title: "Bad Request", Status: 400,
				Detail: "field " + typeErr.Field + " must be " + jsonType(typeErr.Type) + ", not " + typeErr.Value, Field: typeErr.Field}
		case errors.As(err, &syntaxErr):
			return badRequest("invalid-json", "malformed JSON at byte %d: %v", syntaxErr.Offset, err)
		case errors.Is(err, io.EOF):
			if optional {
				return nil
			}
			return badRequest("invalid-json", "the request body is empty; it must be a JSON object")
		case errors.Is(err, io.ErrUnexpectedEOF):
			return badRequest("invalid-json", "the request body ends in the middle of its JSON object")
		}
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			if unq, err := strconv.Unquote(name); err == nil {
				name = unq
			}
			return &Problem{Type: "https://berth.dev/problems/invalid-json", Title: "Bad Request", Status: 400,
				Detail: "unknown field " + strconv.Quote(name), Field: name}
		}
		return badRequest("invalid-json", "%v", err)
	}
	return checkRest(io.MultiReader(dec.Buffered(), c.Request().Body))
}

// checkRest reads what follows a body's JSON value: one JSON value, then
// only whitespace. Reading it to the end also finds a body that breaks off
// after a whole value (a bad chunk, fewer bytes than its Content-Length),
// which is the client's fault and must stop the request before it acts.
func checkRest(rest io.Reader) error {
	buf := make([]byte, 512)
	for {
		n, err := rest.Read(buf)
		for _, b := range buf[:n] {
			if b != ' ' && b != '\t' && b != '\n' && b != '\r' {
				return badRequest("invalid-json", "the request body has data after its JSON object (%q): it must be one JSON value, then only whitespace", b)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return bodyReadError(err)
		}
	}
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
