package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/eventlog"
	"github.com/labstack/echo/v4"
)

func (s *Server) appendEvents(c echo.Context) error {
	var req wire.AppendRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	ar, p := toAppendRequest("", req, appendTraceparent(c.Request().Header))
	if p != nil {
		return p
	}
	commit, err := s.deps.Log.Append(c.Request().Context(), ar)
	if p := appendProblem(err); p != nil {
		return p
	}
	if err != nil {
		return err
	}
	s.deps.Metrics.eventsAppended.Add(float64(len(commit.Events)))
	return c.JSON(http.StatusCreated, wire.AppendResult{AggregateType: commit.AggregateType,
		AggregateID: commit.AggregateID, Version: commit.Version, Position: commit.Position})
}

// appendProblem is the problem of an append the log refused for what it
// asked (409 version-conflict, 400 invalid-event); nil for any other error,
// which is the store's, not the request's.
func appendProblem(err error) *Problem {
	switch {
	case errors.Is(err, eventlog.ErrVersionConflict):
		return problem(http.StatusConflict, "version-conflict", err.Error())
	case errors.Is(err, eventlog.ErrInvalid), errors.Is(err, eventlog.ErrEmptyCommit):
		return badRequest("invalid-event", "%v", err)
	}
	return nil
}

// toAppendRequest checks a commit of the API and returns it as the log's
// request; a problem names the field at fault, after prefix (a batch's
// "appends[3].").
func toAppendRequest(prefix string, req wire.AppendRequest, traceparent string) (eventlog.AppendRequest, *Problem) {
	invalid := func(field, detail string) *Problem {
		return fieldProblem("invalid-event", prefix+field, prefix+detail)
	}
	// Names no client can address are refused here, before they could be parked.
	for _, n := range [][2]string{{"aggregateType", req.AggregateType}, {"aggregateId", req.AggregateID}} {
		if p := checkAddressable(n[0], n[1]); p != nil {
			p.Detail, p.Field = prefix+p.Detail, prefix+p.Field
			return eventlog.AppendRequest{}, p
		}
	}
	if len(req.Events) == 0 {
		return eventlog.AppendRequest{}, invalid("events", "events must hold at least one event")
	}
	ar := eventlog.AppendRequest{AggregateType: req.AggregateType, AggregateID: req.AggregateID,
		ExpectedVersion: eventlog.AnyVersion, OwnerID: req.OwnerID, Traceparent: traceparent}
	if req.ExpectedVersion != nil {
		if *req.ExpectedVersion < 0 {
			return ar, invalid("expectedVersion", "expectedVersion must be 0 or more")
		}
		ar.ExpectedVersion = *req.ExpectedVersion
	}
	ar.Events = make([]eventlog.Event, 0, len(req.Events))
	for i, e := range req.Events {
		if e.Type == "" {
			f := "events[" + strconv.Itoa(i) + "].type"
			return ar, invalid(f, f+" is required")
		}
		data := []byte(e.Data)
		if len(data) == 0 {
			data = []byte("null")
		}
		ar.Events = append(ar.Events, eventlog.Event{Type: e.Type, Payload: data})
	}
	return ar, nil
}

func (s *Server) aggregateEvents(c echo.Context) error {
	from := uint64(1)
	if v := c.QueryParam("from"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fieldProblem("invalid-query", "from", "from must be a version number, got "+strconv.Quote(v))
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
		return 0, fieldProblem("invalid-query", "limit", "limit must be a number from 1 to "+strconv.Itoa(maxLimit)+", got "+strconv.Quote(v))
	}
	return n, nil
}
