package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/jobs"
	"github.com/berthhq/berth/ledger"
	"github.com/labstack/echo/v4"
)

// dryRunSample is how many records a dry run shows.
const dryRunSample = 10

func invalidRequest(field, format string, args ...any) *Problem {
	return fieldProblem("invalid-request", field, fmt.Sprintf(format, args...))
}

func (s *Server) createJob(c echo.Context) error {
	var req wire.JobRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	cfg := s.deps.Config().Jobs
	rate := cfg.DefaultRate
	if req.Rate != nil {
		rate = *req.Rate
		if !(rate > 0) || rate > cfg.MaxRate {
			return invalidRequest("rate", "rate must be above 0 and at most jobs.max-rate (%v records a second), got %v", cfg.MaxRate, rate)
		}
	}
	if req.Action != ledger.JobResume && req.Action != ledger.JobSkip {
		return invalidRequest("action", "action must be resume or skip, got %q", req.Action)
	}
	if !req.DryRun && req.Reason == "" {
		return invalidRequest("reason", "reason is required: it is kept in every aggregate's history (a dry run needs none)")
	}
	spec := jobs.Spec{Action: req.Action, Filter: fromWireJobFilter(req.Filter), Actor: actor(c), Reason: req.Reason, Rate: rate}
	ctx := c.Request().Context()
	if p := spec.Filter.Proven; p != nil {
		if err := s.checkProof(ctx, spec.Filter); err != nil {
			return err
		}
	}
	if class := spec.Filter.Class; class != "" && !s.knownClass(class) {
		// A misspelt class matches nothing, as a search by it lists
		// nothing: refused alike, unless a record still carries it.
		n, _, err := s.deps.Jobs.DryRun(ctx, spec, 0)
		if err != nil {
			return s.jobError(c, err)
		}
		if n == 0 {
			return invalidRequest("filter.class", "%s", s.unknownClass(class))
		}
	}
	if req.DryRun {
		// A dry run changes nothing: no audit entry.
		auditSkip(c)
		n, sample, err := s.deps.Jobs.DryRun(ctx, spec, dryRunSample)
		if err != nil {
			return s.jobError(c, err)
		}
		out := wire.JobDryRun{Matched: n, Sample: make([]wire.ParkedRecord, len(sample))}
		for i, r := range sample {
			out.Sample[i] = toWireRecord(r)
		}
		return c.JSON(http.StatusOK, out)
	}
	j, err := s.deps.Jobs.Create(ctx, spec)
	if err != nil {
		return s.jobError(c, err)
	}
	auditNote(c, auditReasonKey, "%s", req.Reason)
	auditNote(c, auditTargetKey, "%d", j.ID) // as the job's own routes name it
	if p := j.Filter.Proven; p != nil {
		auditNote(c, auditDetailKey, "job %d: %s of %d matched, proven by %s sha256 %s on group %s", j.ID, j.Action, j.Matched,
			p.Module, p.SHA256, j.Filter.Group)
	} else {
		auditNote(c, auditDetailKey, "job %d: %s of %d matched", j.ID, j.Action, j.Matched)
	}
	return c.JSON(http.StatusCreated, toWireJob(j))
}

func (s *Server) listJobs(c echo.Context) error {
	limit, err := queryLimit(c, 100, 1000)
	if err != nil {
		return err
	}
	var before uint64
	if raw := c.QueryParam("after"); raw != "" {
		if before, err = strconv.ParseUint(raw, 10, 64); err != nil {
			return fieldProblem("invalid-query", "after", "after must be the next of a previous page (a job id), got "+strconv.Quote(raw))
		}
	}
	list, err := s.deps.Jobs.Recent(c.Request().Context(), before, limit+1)
	if err != nil {
		return err
	}
	out := wire.JobList{Jobs: []wire.Job{}}
	if len(list) > limit {
		list = list[:limit]
		out.Next = strconv.FormatUint(list[limit-1].ID, 10)
	}
	out.Jobs = mapSlice(list, toWireJob)
	if out.Jobs == nil {
		out.Jobs = []wire.Job{}
	}
	return c.JSON(http.StatusOK, out)
}

// jobID reads the id path parameter.
func jobID(c echo.Context) (uint64, error) {
	id, err := strconv.ParseUint(c.Param("id"), 10, 64)
	if err != nil {
		return 0, notFound("no job %q: job ids are numbers", c.Param("id"))
	}
	return id, nil
}

func (s *Server) getJob(c echo.Context) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	j, err := s.deps.Jobs.Get(c.Request().Context(), id)
	if err != nil {
		return s.jobError(c, err)
	}
	return c.JSON(http.StatusOK, toWireJob(j))
}

func (s *Server) cancelJob(c echo.Context) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	j, err := s.deps.Jobs.Cancel(c.Request().Context(), id, actor(c))
	if err != nil {
		return s.jobError(c, err)
	}
	return c.JSON(http.StatusOK, toWireJob(j))
}

// jobError maps the runner's sentinels to problems.
func (s *Server) jobError(c echo.Context, err error) error {
	switch {
	case errors.Is(err, jobs.ErrInvalid):
		return invalidRequest("filter", "%v", err)
	case errors.Is(err, jobs.ErrNotFound):
		return notFound("%v", err)
	case errors.Is(err, jobs.ErrFinished):
		return problem(http.StatusConflict, "finished", err.Error())
	}
	return s.engineError(c, err)
}

func fromWireJobFilter(f wire.JobFilter) ledger.JobFilter {
	out := ledger.JobFilter{Subscriptions: f.Subscriptions, State: ledger.State(f.State), AggregateType: f.AggregateType,
		Class: f.Class, Message: f.Message, Group: f.Group}
	if f.Proven != nil {
		out.Proven = &ledger.JobProof{Module: f.Proven.Module, SHA256: f.Proven.SHA256}
	}
	if f.FailedAfter != nil {
		out.FailedAfter = *f.FailedAfter
	}
	if f.FailedBefore != nil {
		out.FailedBefore = *f.FailedBefore
	}
	return out
}

func toWireJobFilter(f ledger.JobFilter) wire.JobFilter {
	out := wire.JobFilter{Subscriptions: f.Subscriptions, State: string(f.State), AggregateType: f.AggregateType,
		Class: f.Class, Message: f.Message, Group: f.Group}
	if f.Proven != nil {
		out.Proven = &wire.JobProof{Module: f.Proven.Module, SHA256: f.Proven.SHA256}
	}
	if !f.FailedAfter.IsZero() {
		t := f.FailedAfter
		out.FailedAfter = &t
	}
	if !f.FailedBefore.IsZero() {
		t := f.FailedBefore
		out.FailedBefore = &t
	}
	return out
}

func toWireJob(j *ledger.Job) wire.Job {
	out := wire.Job{ID: j.ID, Action: j.Action, State: string(j.State), Filter: toWireJobFilter(j.Filter), Actor: j.Actor,
		Reason: j.Reason, Rate: j.Rate, Created: j.Created, Updated: j.Updated, Finished: j.Finished, Matched: j.Matched,
		Done: j.Done, Failed: j.Failed, Gone: j.Gone, FailuresDropped: j.FailuresDropped, Failures: []wire.JobFailure{},
		Stopped: j.Stopped}
	for _, f := range j.Failures {
		out.Failures = append(out.Failures, wire.JobFailure{Time: f.Time, Subscription: f.Subscription,
			AggregateType: f.AggregateType, AggregateID: f.AggregateID, Error: f.Error})
	}
	return out
}
