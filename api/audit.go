package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/ledger"
	"github.com/labstack/echo/v4"
)

// Keys a handler sets on its context for the audit entry of its call.
const (
	auditReasonKey = "berth.audit.reason" // the reason the caller gave
	auditDetailKey = "berth.audit.detail" // what came of it
	auditTargetKey = "berth.audit.target" // what it acted on, when the path does not name it (a creation)
	auditSkipKey   = "berth.audit.skip"   // set: the call changed nothing (a dry run), no entry
)

// auditNote sets a part of the call's audit entry.
func auditNote(c echo.Context, key, format string, args ...any) {
	c.Set(key, fmt.Sprintf(format, args...))
}

// auditSkip marks a call of an audited route that changed nothing (a dry
// run): it is no change to keep in the audit log.
func auditSkip(c echo.Context) { c.Set(auditSkipKey, true) }

// audit writes an entry to the ledger's audit log for every state-changing
// call that succeeded but an append (the route table puts it on each of
// them, so none is forgotten; see route.audited) and a call that changed
// nothing (a dry run, [auditSkip]): the actor, the route, its target (the
// path's parameters, or what a creation made), the reason and what came of
// it. An entry the ledger cannot take (a full disk) is logged: the call has
// happened.
func (s *Server) audit(r route) echo.MiddlewareFunc {
	action := r.method + " " + openapiPath(r.path)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := next(c)
			status := c.Response().Status
			if skip, _ := c.Get(auditSkipKey).(bool); err != nil || status >= 300 || s.deps.Ledger == nil || skip {
				return err
			}
			e := ledger.AuditEntry{Time: time.Now().UTC(), Actor: actor(c), Action: action, Status: status,
				Target: auditTarget(c), Reason: noted(c, auditReasonKey), Detail: noted(c, auditDetailKey)}
			ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), 10*time.Second)
			defer cancel()
			if aerr := s.deps.Ledger.Update(ctx, func(tx ledger.Tx) error { return tx.Audit(e) }); aerr != nil {
				s.log.Error("audit entry not written", "action", action, "target", e.Target, "actor", e.Actor, "error", aerr)
			}
			return nil
		}
	}
}

func noted(c echo.Context, key string) string {
	v, _ := c.Get(key).(string)
	return v
}

// auditTarget is what the call acted on: what the handler noted (a
// creation names what it created), else the path's parameters (as
// decoded), joined by "/".
func auditTarget(c echo.Context) string {
	if t := noted(c, auditTargetKey); t != "" {
		return t
	}
	var parts []string
	for _, name := range c.ParamNames() {
		parts = append(parts, c.Param(name))
	}
	return strings.Join(parts, "/")
}

func (s *Server) listAudit(c echo.Context) error {
	limit, err := queryLimit(c, 100, 1000)
	if err != nil {
		return err
	}
	var after uint64
	if raw := c.QueryParam("after"); raw != "" {
		if after, err = strconv.ParseUint(raw, 10, 64); err != nil {
			return fieldProblem("invalid-query", "after", "after must be the next of a previous page (an entry's seq), got "+strconv.Quote(raw))
		}
	}
	var entries []ledger.AuditEntry
	err = s.deps.Ledger.View(c.Request().Context(), func(tx ledger.Tx) error {
		var err error
		entries, err = tx.AuditLog(after, limit+1)
		return err
	})
	if err != nil {
		return err
	}
	out := wire.AuditPage{Entries: []wire.AuditEntry{}}
	if len(entries) > limit {
		entries = entries[:limit]
		out.Next = strconv.FormatUint(entries[limit-1].Seq, 10)
	}
	for _, e := range entries {
		out.Entries = append(out.Entries, wire.AuditEntry{Seq: e.Seq, Time: e.Time, Actor: e.Actor, Action: e.Action,
			Target: e.Target, Reason: e.Reason, Status: e.Status, Detail: e.Detail})
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) listResolved(c echo.Context) error {
	limit, err := queryLimit(c, 100, 1000)
	if err != nil {
		return err
	}
	f := ledger.ResolvedFilter{Subscription: c.QueryParam("subscription"), AggregateType: c.QueryParam("aggregateType"),
		AggregateID: c.QueryParam("aggregateId"), After: c.QueryParam("after"), Limit: limit}
	var recs []*ledger.Resolved
	var next string
	err = s.deps.Ledger.View(c.Request().Context(), func(tx ledger.Tx) error {
		var err error
		recs, next, err = tx.ListResolved(f)
		return err
	})
	if err != nil {
		if errorsIsInvalid(err) {
			return problem(http.StatusBadRequest, "invalid-query",
				"aggregateType needs subscription, aggregateId needs aggregateType, and after must be a previous page's next: "+err.Error())
		}
		return err
	}
	out := wire.ResolvedPage{Records: make([]wire.ResolvedRecord, len(recs)), Next: next}
	for i, r := range recs {
		out.Records[i] = wire.ResolvedRecord{ParkedRecord: toWireRecord(&r.Record), ResolvedAt: r.ResolvedAt}
	}
	return c.JSON(http.StatusOK, out)
}

func errorsIsInvalid(err error) bool { return errors.Is(err, ledger.ErrInvalid) }
