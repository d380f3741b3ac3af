package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/cluster"
	"github.com/berthhq/berth/internal/suggest"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/subscription"
	"github.com/labstack/echo/v4"
)

// subscriptionJSON is the subscription of st as the API shows it.
func (s *Server) subscriptionJSON(st subscription.Status, detail bool) wire.Subscription {
	return toWireSubscription(st, s.deps.Modules.ModuleOf(st.Name), detail)
}

func (s *Server) listSubscriptions(c echo.Context) error {
	names := s.deps.Engine.Subscriptions()
	sort.Strings(names)
	out := make([]wire.Subscription, 0, len(names))
	for _, name := range names {
		st, err := s.deps.Engine.Status(c.Request().Context(), name)
		if err != nil {
			continue // removed between the list and the status
		}
		out = append(out, s.subscriptionJSON(st, false))
	}
	return c.JSON(http.StatusOK, wire.SubscriptionList{Subscriptions: out})
}

func (s *Server) getSubscription(c echo.Context) error {
	st, err := s.deps.Engine.Status(c.Request().Context(), c.Param("name"))
	if err != nil {
		return s.engineError(c, err)
	}
	return c.JSON(http.StatusOK, s.subscriptionJSON(st, true))
}

func (s *Server) pauseSubscription(c echo.Context) error {
	var req wire.PauseRequest
	if err := decodeOptionalJSON(c, &req); err != nil {
		return err
	}
	auditNote(c, auditReasonKey, "%s", req.Reason)
	ctx, by := c.Request().Context(), caller(c, req.Reason)
	var err error
	if req.Until != nil {
		auditNote(c, auditDetailKey, "until %s", req.Until.UTC().Format(time.RFC3339))
		err = s.deps.Operator.PauseUntil(ctx, c.Param("name"), *req.Until, by)
	} else {
		err = s.deps.Operator.Pause(ctx, c.Param("name"), by)
	}
	if errors.Is(err, subscription.ErrBadUntil) {
		return invalidRequest("until", "%v", err)
	}
	if err != nil {
		return s.engineError(c, err)
	}
	return s.getSubscription(c)
}

func (s *Server) unpauseSubscription(c echo.Context) error {
	if err := s.deps.Operator.Unpause(c.Request().Context(), c.Param("name"), caller(c, "")); err != nil {
		return s.engineError(c, err)
	}
	return s.getSubscription(c)
}

func (s *Server) resetSubscription(c echo.Context) error {
	var req wire.ResetRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Position == nil {
		return fieldProblem("invalid-request", "position", "position is required: 1 replays from the beginning, head+1 skips to the end")
	}
	if err := s.deps.Operator.Reset(c.Request().Context(), c.Param("name"), *req.Position, caller(c, "")); err != nil {
		return s.engineError(c, err)
	}
	auditNote(c, auditDetailKey, "to position %d", *req.Position)
	return s.getSubscription(c)
}

// engineError maps the engine's sentinels to problems; c's name parameter
// is the subscription the request named.
func (s *Server) engineError(c echo.Context, err error) error {
	switch {
	case errors.Is(err, subscription.ErrUnknownSubscription):
		return s.unknownSubscription(c.Param("name"))
	case errors.Is(err, subscription.ErrNotParked):
		return notFound("%v", err)
	case errors.Is(err, subscription.ErrBadPosition), errors.Is(err, subscription.ErrBadVersion):
		return badRequest("out-of-range", "%v", err)
	case errors.Is(err, subscription.ErrBusy):
		return problem(http.StatusConflict, "busy", err.Error()+"; try again when the retry has finished")
	case errors.Is(err, subscription.ErrClosed):
		return problem(http.StatusServiceUnavailable, "unavailable", err.Error())
	// A cluster's: the host the call must reach is moving, down or slow;
	// the detail says whether anything changed.
	case errors.Is(err, subscription.ErrNotOwned), errors.Is(err, cluster.ErrUnreachable),
		errors.Is(err, cluster.ErrUnconfirmed):
		return problem(http.StatusServiceUnavailable, "unavailable", err.Error())
	}
	return err
}

// unknownSubscription is the 404 for a subscription the engine does not
// have, with the nearest name it has, so that every client (the CLI, the
// console, curl) gets the same "did you mean" from the one place that knows
// the names.
func (s *Server) unknownSubscription(name string) *Problem {
	names := s.deps.Engine.Subscriptions()
	sort.Strings(names)
	switch near := suggest.Closest(name, names); {
	case near != "":
		return notFound("unknown subscription %q; did you mean %q?", name, near)
	case len(names) == 0:
		return notFound("unknown subscription %q: the host has none (pushing a module adds its subscriptions)", name)
	}
	return notFound("unknown subscription %q", name)
}

func (s *Server) listParked(c echo.Context) error {
	limit, err := queryLimit(c, 100, 1000)
	if err != nil {
		return err
	}
	f := ledger.Filter{Subscription: c.QueryParam("subscription"), State: ledger.State(c.QueryParam("state")),
		AggregateType: c.QueryParam("aggregateType"), Class: c.QueryParam("class"), Message: c.QueryParam("message"),
		Group: c.QueryParam("group"), After: c.QueryParam("after"), Limit: limit}
	if f.FailedAfter, err = queryTime("failedAfter", c.QueryParam("failedAfter")); err != nil {
		return err
	}
	if f.FailedBefore, err = queryTime("failedBefore", c.QueryParam("failedBefore")); err != nil {
		return err
	}
	switch f.State {
	case "", ledger.StateRetrying, ledger.StateWaiting, ledger.StateResuming:
	default:
		return fieldProblem("invalid-query", "state", "state must be retrying, waiting or resuming, got "+strconv.Quote(string(f.State)))
	}
	var records []*ledger.Record
	var next string
	err = s.deps.Ledger.View(c.Request().Context(), func(tx ledger.Tx) error {
		var err error
		records, next, err = tx.ListParked(f)
		return err
	})
	if errors.Is(err, ledger.ErrInvalid) {
		return fieldProblem("invalid-query", "after", "after must be the next cursor of a previous page: "+err.Error())
	}
	if err != nil {
		return err
	}
	// A misspelt subscription would list nothing, as if nothing were
	// parked: say it is unknown, with the nearest name. (A subscription
	// the engine no longer has may still hold records: those are listed.)
	if len(records) == 0 && f.Subscription != "" && f.After == "" && !slices.Contains(s.deps.Engine.Subscriptions(), f.Subscription) {
		return s.unknownSubscription(f.Subscription)
	}
	// So would a misspelt class (one a record still carries is listed).
	if len(records) == 0 && f.Class != "" && f.After == "" && !s.knownClass(f.Class) {
		return fieldProblem("invalid-query", "class", s.unknownClass(f.Class))
	}
	page := wire.ParkedPage{Records: make([]wire.ParkedRecord, len(records)), Next: next}
	for i, r := range records {
		page.Records[i] = toWireRecord(r)
	}
	return c.JSON(http.StatusOK, page)
}

func (s *Server) getParked(c echo.Context) error {
	ctx := c.Request().Context()
	rec, err := s.deps.Engine.Parked(ctx, c.Param("name"), c.Param("type"), c.Param("id"))
	if err != nil {
		return s.engineError(c, err)
	}
	// With the record, what an operator needs to decide between resume and
	// skip: the event it stopped at, as appended (absent if the log no
	// longer has it), and how many later commits of the aggregate it holds.
	out := wire.ParkedRecordDetail{ParkedRecord: toWireRecord(rec)}
	commits, err := s.deps.Log.ReadAggregate(ctx, rec.AggregateType, rec.AggregateID, rec.Version, 1)
	if err != nil {
		return err
	}
	if len(commits) == 1 && commits[0].Version == rec.Version && int(rec.Index) < len(commits[0].Events) {
		ev := toWireCommit(commits[0]).Events[rec.Index]
		out.Event = &ev
	}
	current, err := s.deps.Log.Version(ctx, rec.AggregateType, rec.AggregateID)
	if err != nil {
		return err
	}
	if current > rec.Version {
		out.HeldCommits = current - rec.Version
	}
	if _, _, err := s.capsule(ctx, rec.Subscription, rec.AggregateType, rec.AggregateID); err == nil {
		out.Capsule = capsulePath(rec.Subscription, rec.AggregateType, rec.AggregateID)
	} else if !errors.Is(err, ledger.ErrNotFound) {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// operatorWait bounds how long resume and skip wait for an aggregate that a
// long-horizon retry is working on (server.operator-wait).
func (s *Server) operatorWait() time.Duration { return s.deps.Config().Server.OperatorWait.Std() }

// readOperatorRequest reads the optional body of resume and skip.
func readOperatorRequest(c echo.Context) (wire.OperatorRequest, error) {
	var req wire.OperatorRequest
	return req, decodeOptionalJSON(c, &req)
}

func (s *Server) resumeParked(c echo.Context) error {
	req, err := readOperatorRequest(c)
	if err != nil {
		return err
	}
	if req.ThroughVersion != 0 {
		return fieldProblem("invalid-request", "throughVersion", "throughVersion applies to skip, not resume")
	}
	// A running long-horizon retry of the aggregate holds it for up to its
	// timeout; the operator gets a 409 rather than a hanging request.
	auditNote(c, auditReasonKey, "%s", req.Reason)
	ctx, cancel := context.WithTimeout(c.Request().Context(), s.operatorWait())
	defer cancel()
	if err := s.deps.Operator.Resume(ctx, c.Param("name"), c.Param("type"), c.Param("id"), caller(c, req.Reason)); err != nil {
		// Resuming is repeatable: a record already resuming is no 404.
		if rec, perr := s.deps.Engine.Parked(ctx, c.Param("name"), c.Param("type"), c.Param("id")); errors.Is(err, subscription.ErrNotParked) &&
			perr == nil && rec.State == ledger.StateResuming {
			return c.JSON(http.StatusAccepted, wire.Status{Status: wire.StatusResuming})
		}
		return s.engineError(c, err)
	}
	return c.JSON(http.StatusAccepted, wire.Status{Status: wire.StatusResuming})
}

func (s *Server) skipParked(c echo.Context) error {
	req, err := readOperatorRequest(c)
	if err != nil {
		return err
	}
	auditNote(c, auditReasonKey, "%s", req.Reason)
	ctx, cancel := context.WithTimeout(c.Request().Context(), s.operatorWait())
	defer cancel()
	if err := s.deps.Operator.Skip(ctx, c.Param("name"), c.Param("type"), c.Param("id"), req.ThroughVersion, caller(c, req.Reason)); err != nil {
		return s.engineError(c, err)
	}
	return c.JSON(http.StatusAccepted, wire.Status{Status: wire.StatusSkipped})
}
