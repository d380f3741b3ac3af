package api

import (
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/ledger"
	"github.com/labstack/echo/v4"
)

// invalidQuery is the 400 of a query parameter that is not understood.
func invalidQuery(field, detail string) *Problem {
	return &Problem{Type: "https://berth.dev/problems/invalid-query", Title: "Bad Request", Status: 400,
		Detail: detail, Field: field}
}

// listGroups answers GET /v1/parked/groups: the failure groups of the
// parked records, biggest first, counted from the ledger's counters.
func (s *Server) listGroups(c echo.Context) error {
	limit, err := queryLimit(c, 100, 1000)
	if err != nil {
		return err
	}
	for _, p := range []string{"failedAfter", "failedBefore", "group"} {
		if c.QueryParam(p) != "" {
			return invalidQuery(p, p+" is not a filter of groups: a group's counts are kept by state, aggregate type, class and message; list its records with GET /v1/parked?group=…")
		}
	}
	f := ledger.GroupFilter{Subscription: c.QueryParam("subscription"), State: ledger.State(c.QueryParam("state")),
		AggregateType: c.QueryParam("aggregateType"), Class: c.QueryParam("class"), Message: c.QueryParam("message"),
		After: c.QueryParam("after"), Limit: limit}
	switch f.State {
	case "", ledger.StateRetrying, ledger.StateWaiting, ledger.StateResuming:
	default:
		return invalidQuery("state", "state must be retrying, waiting or resuming, got "+strconv.Quote(string(f.State)))
	}
	var groups []ledger.Group
	var next string
	err = s.deps.Ledger.View(c.Request().Context(), func(tx ledger.Tx) error {
		var err error
		groups, next, err = tx.GroupsParked(f)
		return err
	})
	if errors.Is(err, ledger.ErrInvalid) {
		return invalidQuery("after", "after must be the next cursor of a previous page: "+err.Error())
	}
	if err != nil {
		return err
	}
	if len(groups) == 0 && f.Subscription != "" && f.After == "" && !slices.Contains(s.deps.Engine.Subscriptions(), f.Subscription) {
		return s.unknownSubscription(f.Subscription)
	}
	if len(groups) == 0 && f.Class != "" && f.After == "" && !s.knownClass(f.Class) {
		return invalidQuery("class", s.unknownClass(f.Class))
	}
	page := wire.ParkedGroupPage{Groups: make([]wire.ParkedGroup, len(groups)), Next: next}
	for i, g := range groups {
		page.Groups[i] = toWireGroup(g)
	}
	return c.JSON(http.StatusOK, page)
}

func toWireGroup(g ledger.Group) wire.ParkedGroup {
	classes := g.Classes
	if classes == nil {
		classes = []string{}
	}
	return wire.ParkedGroup{Subscription: g.Subscription, Group: g.Fingerprint, Message: g.Message,
		Classes: classes, Module: g.Module, Count: g.Count, FirstFailure: g.FirstFailure, LastFailure: g.LastFailure,
		Modules: g.Modules, SampleType: g.SampleType, SampleID: g.SampleID}
}
