package api

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/subscription"
	"github.com/labstack/echo/v4"
)

// subscriptionJSON is a subscription as the API shows it.
type subscriptionJSON struct {
	Name              string                 `json:"name"`
	Module            string                 `json:"module,omitempty"`
	State             string                 `json:"state"`
	Checkpoint        uint64                 `json:"checkpoint"`
	DurableCheckpoint uint64                 `json:"durableCheckpoint"`
	Head              uint64                 `json:"head"`
	Lag               uint64                 `json:"lag"`
	Parked            map[ledger.State]int   `json:"parked"`
	Partitions        []partitionJSON        `json:"partitions,omitempty"`
	Retry             map[string]settingJSON `json:"retry"`
	ParkedRetries     parkedJSON             `json:"parkedRetries"`
}

type partitionJSON struct {
	Index        int       `json:"index"`
	State        string    `json:"state"`
	PauseReason  string    `json:"pauseReason,omitempty"`
	PausedSince  time.Time `json:"pausedSince,omitzero"`
	NextProbe    time.Time `json:"nextProbe,omitzero"`
	FailedProbes int       `json:"failedProbes,omitempty"`
	Concurrency  int       `json:"concurrency"`
	Active       int       `json:"active"`
	Held         int       `json:"held"`
}

// settingJSON is one effective retry setting and the layer it came from.
type settingJSON struct {
	Value  any          `json:"value"`
	Source retry.Source `json:"source"`
}

type parkedJSON struct {
	MaxRetries int    `json:"maxRetries"`
	FirstDelay string `json:"firstDelay"`
	MaxDelay   string `json:"maxDelay"`
	Timeout    string `json:"timeout"`
	// RetryUnrecoverable is subscription.parked.retry-unrecoverable in effect.
	RetryUnrecoverable bool `json:"retryUnrecoverable"`
}

func (s *Server) subscriptionJSON(st subscription.Status, detail bool) subscriptionJSON {
	p := st.Policy
	out := subscriptionJSON{
		Name: st.Name, Module: s.deps.Modules.ModuleOf(st.Name), State: st.State, Checkpoint: st.Checkpoint,
		DurableCheckpoint: st.DurableCheckpoint, Head: st.Head, Lag: st.Lag, Parked: st.Parked,
		Retry: map[string]settingJSON{
			retry.KeyMaxAttempts:          {p.MaxAttempts, p.Sources[retry.KeyMaxAttempts]},
			retry.KeyInitialBackoff:       {p.InitialBackoff.String(), p.Sources[retry.KeyInitialBackoff]},
			retry.KeyMaxBackoff:           {p.MaxBackoff.String(), p.Sources[retry.KeyMaxBackoff]},
			retry.KeyTimeout:              {p.Timeout.String(), p.Sources[retry.KeyTimeout]},
			retry.KeyUnrecoverable:        {nonNil(p.Unrecoverable), p.Sources[retry.KeyUnrecoverable]},
			retry.KeyRecoverable:          {nonNil(p.Recoverable), p.Sources[retry.KeyRecoverable]},
			retry.KeyBackpressureAttempts: {p.BackpressureAttempts, p.Sources[retry.KeyBackpressureAttempts]},
		},
		ParkedRetries: parkedJSON{MaxRetries: st.ParkedSettings.MaxRetries, FirstDelay: st.ParkedSettings.FirstDelay.String(),
			MaxDelay: st.ParkedSettings.MaxDelay.String(), Timeout: st.ParkedSettings.Timeout.String(),
			RetryUnrecoverable: st.ParkedSettings.RetriesUnrecoverable()},
	}
	if out.Parked == nil {
		out.Parked = map[ledger.State]int{}
	}
	for _, ps := range st.Partitions {
		if !detail && ps.State == subscription.StateRunning && ps.Active == 0 && ps.Held == 0 {
			continue
		}
		out.Partitions = append(out.Partitions, partitionJSON{Index: ps.Index, State: ps.State, PauseReason: ps.PauseReason,
			PausedSince: ps.PausedSince, NextProbe: ps.NextProbe, FailedProbes: ps.FailedProbes,
			Concurrency: ps.Concurrency, Active: ps.Active, Held: ps.Held})
	}
	return out
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

func (s *Server) listSubscriptions(c echo.Context) error {
	names := s.deps.Engine.Subscriptions()
	sort.Strings(names)
	out := make([]subscriptionJSON, 0, len(names))
	for _, name := range names {
		st, err := s.deps.Engine.Status(c.Request().Context(), name)
		if err != nil {
			continue // removed between the list and the status
		}
		out = append(out, s.subscriptionJSON(st, false))
	}
	return c.JSON(http.StatusOK, map[string]any{"subscriptions": out})
}

func (s *Server) getSubscription(c echo.Context) error {
	st, err := s.deps.Engine.Status(c.Request().Context(), c.Param("name"))
	if err != nil {
		return engineError(err)
	}
	return c.JSON(http.StatusOK, s.subscriptionJSON(st, true))
}

func (s *Server) pauseSubscription(c echo.Context) error {
	if err := s.deps.Engine.Pause(c.Request().Context(), c.Param("name")); err != nil {
		return engineError(err)
	}
	return s.getSubscription(c)
}

func (s *Server) unpauseSubscription(c echo.Context) error {
	if err := s.deps.Engine.Unpause(c.Request().Context(), c.Param("name")); err != nil {
		return engineError(err)
	}
	return s.getSubscription(c)
}

type resetRequest struct {
	Position *uint64 `json:"position"`
}

func (s *Server) resetSubscription(c echo.Context) error {
	var req resetRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Position == nil {
		return &Problem{Type: "https://berth.dev/problems/invalid-request", Title: "Bad Request", Status: 400,
			Detail: "position is required: 1 replays from the beginning, head+1 skips to the end", Field: "position"}
	}
	if err := s.deps.Engine.Reset(c.Request().Context(), c.Param("name"), *req.Position); err != nil {
		return engineError(err)
	}
	return s.getSubscription(c)
}

// engineError maps the engine's sentinels to problems.
func engineError(err error) error {
	switch {
	case errors.Is(err, subscription.ErrUnknownSubscription):
		return notFound("%v", err)
	case errors.Is(err, subscription.ErrNotParked):
		return notFound("%v", err)
	case errors.Is(err, subscription.ErrBadPosition), errors.Is(err, subscription.ErrBadVersion):
		return badRequest("out-of-range", "%v", err)
	case errors.Is(err, subscription.ErrBusy):
		return problem(http.StatusConflict, "busy", err.Error()+"; try again when the retry has finished")
	case errors.Is(err, subscription.ErrClosed):
		return problem(http.StatusServiceUnavailable, "unavailable", err.Error())
	}
	return err
}

func (s *Server) listParked(c echo.Context) error {
	limit, err := queryLimit(c, 100, 1000)
	if err != nil {
		return err
	}
	f := ledger.Filter{Subscription: c.QueryParam("subscription"), State: ledger.State(c.QueryParam("state")),
		AggregateType: c.QueryParam("aggregateType"), After: c.QueryParam("after"), Limit: limit}
	switch f.State {
	case "", ledger.StateRetrying, ledger.StateWaiting, ledger.StateResuming:
	default:
		return &Problem{Type: "https://berth.dev/problems/invalid-query", Title: "Bad Request", Status: 400,
			Detail: "state must be retrying, waiting or resuming, got " + strconv.Quote(string(f.State)), Field: "state"}
	}
	var records []*ledger.Record
	var next string
	err = s.deps.Ledger.View(c.Request().Context(), func(tx ledger.Tx) error {
		var err error
		records, next, err = tx.ListParked(f)
		return err
	})
	if errors.Is(err, ledger.ErrInvalid) {
		return &Problem{Type: "https://berth.dev/problems/invalid-query", Title: "Bad Request", Status: 400,
			Detail: "after must be the next cursor of a previous page: " + err.Error(), Field: "after"}
	}
	if err != nil {
		return err
	}
	if records == nil {
		records = []*ledger.Record{}
	}
	return c.JSON(http.StatusOK, map[string]any{"records": records, "next": next})
}

// parkedDetailJSON is a ledger record with what an operator needs to decide
// between resume and skip: the event it stopped at, as appended, and how
// many later commits of the aggregate it holds back.
type parkedDetailJSON struct {
	*ledger.Record
	Event       *eventJSON `json:"event,omitempty"` // absent if the log no longer has it
	HeldCommits uint64     `json:"heldCommits"`
}

func (s *Server) getParked(c echo.Context) error {
	ctx := c.Request().Context()
	rec, err := s.deps.Engine.Parked(ctx, c.Param("name"), c.Param("type"), c.Param("id"))
	if err != nil {
		return engineError(err)
	}
	out := parkedDetailJSON{Record: rec}
	commits, err := s.deps.Log.ReadAggregate(ctx, rec.AggregateType, rec.AggregateID, rec.Version, 1)
	if err != nil {
		return err
	}
	if len(commits) == 1 && commits[0].Version == rec.Version && int(rec.Index) < len(commits[0].Events) {
		ev := toCommitJSON(commits[0]).Events[rec.Index]
		out.Event = &ev
	}
	current, err := s.deps.Log.Version(ctx, rec.AggregateType, rec.AggregateID)
	if err != nil {
		return err
	}
	if current > rec.Version {
		out.HeldCommits = current - rec.Version
	}
	return c.JSON(http.StatusOK, out)
}

// operatorWait bounds how long resume and skip wait for an aggregate that a
// long-horizon retry is working on.
const operatorWait = 10 * time.Second

type operatorRequest struct {
	Reason         string `json:"reason"`
	ThroughVersion uint64 `json:"throughVersion"`
}

// readOperatorRequest reads the optional body of resume and skip.
func readOperatorRequest(c echo.Context) (operatorRequest, error) {
	var req operatorRequest
	return req, decodeOptionalJSON(c, &req)
}

func (s *Server) resumeParked(c echo.Context) error {
	req, err := readOperatorRequest(c)
	if err != nil {
		return err
	}
	if req.ThroughVersion != 0 {
		return &Problem{Type: "https://berth.dev/problems/invalid-request", Title: "Bad Request", Status: 400,
			Detail: "throughVersion applies to skip, not resume", Field: "throughVersion"}
	}
	// A running long-horizon retry of the aggregate holds it for up to its
	// timeout; the operator gets a 409 rather than a hanging request.
	ctx, cancel := context.WithTimeout(c.Request().Context(), operatorWait)
	defer cancel()
	if err := s.deps.Engine.Resume(ctx, c.Param("name"), c.Param("type"), c.Param("id"), actor(c), req.Reason); err != nil {
		// Resuming is repeatable: a record already resuming is no 404.
		if rec, perr := s.deps.Engine.Parked(ctx, c.Param("name"), c.Param("type"), c.Param("id")); errors.Is(err, subscription.ErrNotParked) &&
			perr == nil && rec.State == ledger.StateResuming {
			return c.JSON(http.StatusAccepted, map[string]string{"status": "resuming"})
		}
		return engineError(err)
	}
	return c.JSON(http.StatusAccepted, map[string]string{"status": "resuming"})
}

func (s *Server) skipParked(c echo.Context) error {
	req, err := readOperatorRequest(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), operatorWait)
	defer cancel()
	if err := s.deps.Engine.Skip(ctx, c.Param("name"), c.Param("type"), c.Param("id"), req.ThroughVersion, actor(c), req.Reason); err != nil {
		return engineError(err)
	}
	return c.JSON(http.StatusAccepted, map[string]string{"status": "skipped"})
}
