package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/ledger"
	"github.com/labstack/echo/v4"
)

// invalidQuery is the 400 of a query parameter that is not understood.
func invalidQuery(field, detail string) *Problem {
	return fieldProblem("invalid-query", field, detail)
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

// putProof keeps a candidate's verdict on a group, a page of its handled
// aggregates at a time, for a job "proven" by it.
func (s *Server) putProof(c echo.Context) error {
	var req wire.ProofRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	switch {
	case req.Subscription == "":
		return invalidRequest("subscription", "subscription is required: the group's")
	case req.Module == "":
		return invalidRequest("module", "module is required: the candidate's module name")
	case len(req.SHA256) != 64 || strings.Trim(strings.ToLower(req.SHA256), "0123456789abcdef") != "":
		return invalidRequest("sha256", "sha256 must be the 64 hex digits of the candidate's SHA-256, got %q", req.SHA256)
	case len(req.Aggregates) > maxProofPage:
		return invalidRequest("aggregates", "at most %d aggregates a request, got %d: send the rest in further requests", maxProofPage, len(req.Aggregates))
	}
	p := ledger.Proof{Subscription: req.Subscription, Group: c.Param("group"), Module: req.Module,
		SHA256: strings.ToLower(req.SHA256), Replayed: req.Replayed, Handled: req.Handled, StillFailing: req.StillFailing,
		Departed: req.Departed, Actor: actor(c), Created: time.Now().UTC()}
	keys := make([]ledger.ProofKey, len(req.Aggregates))
	for i, a := range req.Aggregates {
		keys[i] = ledger.ProofKey{AggregateType: a.AggregateType, AggregateID: a.AggregateID}
	}
	err := s.deps.Ledger.Update(c.Request().Context(), func(tx ledger.Tx) error { return tx.PutProof(p, keys) })
	if errors.Is(err, ledger.ErrInvalid) {
		return invalidRequest("aggregates", "%v", err)
	}
	if err != nil {
		return err
	}
	auditNote(c, auditTargetKey, "%s", p.Group)
	auditNote(c, auditDetailKey, "proof of %s sha256 %s: %d handled, %d still failing, %d departed of %d replayed",
		p.Module, p.SHA256, p.Handled, p.StillFailing, p.Departed, p.Replayed)
	return c.JSON(http.StatusCreated, wire.Proof{Subscription: p.Subscription, Group: p.Group, Module: p.Module, SHA256: p.SHA256,
		Replayed: p.Replayed, Handled: p.Handled, StillFailing: p.StillFailing, Departed: p.Departed, Actor: p.Actor, Created: p.Created})
}

// maxProofPage bounds the aggregates of one proof request: one
// transaction of the ledger each.
const maxProofPage = 1000

// checkProof refuses a job proven by a candidate that is not the module
// version deployed, or by no kept proof on the filter's group.
func (s *Server) checkProof(ctx context.Context, f ledger.JobFilter) error {
	p := f.Proven
	if f.Group == "" {
		return invalidRequest("filter.group", "a proven job names the group its proof is of")
	}
	info, ok := s.deps.Modules.Get(p.Module)
	if !ok || !strings.EqualFold(info.SHA256, p.SHA256) {
		return problem(http.StatusConflict, "not-deployed", fmt.Sprintf(
			"the candidate %s sha256 %s is not the module version deployed (deploy it first: its proof holds for those bytes only)", p.Module, p.SHA256))
	}
	found := false
	err := s.deps.Ledger.View(ctx, func(tx ledger.Tx) error {
		subs := f.Subscriptions
		if len(subs) == 0 {
			subs = s.deps.Engine.Subscriptions()
		}
		for _, sub := range subs {
			if _, err := tx.Proof(sub, f.Group, strings.ToLower(p.SHA256)); err == nil {
				found = true
			} else if !errors.Is(err, ledger.ErrNotFound) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !found {
		return invalidRequest("filter.proven", "no proof of %s sha256 %s on group %s: replay the group against it first (berth parked replay --group %s --module FILE)",
			p.Module, p.SHA256, f.Group, f.Group)
	}
	p.SHA256 = strings.ToLower(p.SHA256)
	return nil
}
