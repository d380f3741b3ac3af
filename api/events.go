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
	// Names no client can address are refused here, before they could be parked.
	if p := checkAddressable("aggregateType", req.AggregateType); p != nil {
		return p
	}
	if p := checkAddressable("aggregateId", req.AggregateID); p != nil {
		return p
	}
	if len(req.Events) == 0 {
		return fieldProblem("invalid-event", "events", "events must hold at least one event")
	}
	ar := eventlog.AppendRequest{AggregateType: req.AggregateType, AggregateID: req.AggregateID,
		ExpectedVersion: eventlog.AnyVersion, OwnerID: req.OwnerID, Traceparent: appendTraceparent(c.Request().Header)}
	if req.ExpectedVersion != nil {
		if *req.ExpectedVersion < 0 {
			return fieldProblem("invalid-event", "expectedVersion", "expectedVersion must be 0 or more")
		}
		ar.ExpectedVersion = *req.ExpectedVersion
	}
	for i, e := range req.Events {
		if e.Type == "" {
			return fieldProblem("invalid-event", "events["+strconv.Itoa(i)+"].type", "events["+strconv.Itoa(i)+"].type is required")
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
