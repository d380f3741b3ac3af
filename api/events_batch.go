package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/diskspace"
	"github.com/labstack/echo/v4"
)

// maxBatchAppends bounds the appends of one POST /v1/events/batch, so that
// one request cannot hold the log's writer for long; server.max-body-size
// bounds its bytes.
const maxBatchAppends = 1000

// appendBatch is POST /v1/events/batch: many commits, each appended on its
// own (atomic per commit, never across them) and all queued together in the
// log's group commit, so they share its fsyncs instead of waiting for one
// each. A malformed append refuses the whole request (400 naming it) before
// anything is written; otherwise the answer is 200 with one result per
// append, each 201 or the problem POST /v1/events would have answered for
// it, given once every appended commit is durable. When none was appended
// for a reason of the store's (the disk below its reserve, NATS not
// answering), the answer is that problem, as for one append.
func (s *Server) appendBatch(c echo.Context) error {
	var req wire.BatchAppendRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	switch {
	case len(req.Appends) == 0:
		return fieldProblem("invalid-event", "appends", "appends must hold at least one append")
	case len(req.Appends) > maxBatchAppends:
		return fieldProblem("invalid-event", "appends",
			"appends holds "+strconv.Itoa(len(req.Appends))+" appends, more than "+strconv.Itoa(maxBatchAppends)+": send them in several batches")
	}
	tp := appendTraceparent(c.Request().Header)
	reqs := make([]eventlog.AppendRequest, len(req.Appends))
	for i, a := range req.Appends {
		prefix := "appends[" + strconv.Itoa(i) + "]."
		ar, p := toAppendRequest(prefix, a, tp)
		if p != nil {
			return p
		}
		// The log's own checks (name lengths, …), here, so that a malformed
		// append refuses the batch before any of it is written.
		if _, err := eventlog.NewCommit(ar); err != nil {
			return fieldProblem("invalid-event", prefix[:len(prefix)-1], prefix[:len(prefix)-1]+": "+err.Error())
		}
		reqs[i] = ar
	}
	out := s.deps.Log.AppendMany(c.Request().Context(), reqs)
	res := wire.BatchAppendResult{Results: make([]wire.BatchAppendItem, len(out))}
	events := 0
	for i, o := range out {
		item := &res.Results[i]
		item.AggregateType, item.AggregateID = reqs[i].AggregateType, reqs[i].AggregateID
		if o.Err == nil {
			item.Status, item.Version, item.Position = http.StatusCreated, o.Commit.Version, o.Commit.Position
			res.Appended++
			events += len(o.Commit.Events)
			continue
		}
		res.Failed++
		item.Problem = appendProblem(o.Err)
		if item.Problem == nil {
			item.Problem = s.storeProblem(c, o.Err)
		}
		item.Status = item.Problem.Status
	}
	s.deps.Metrics.eventsAppended.Add(float64(events))
	if res.Appended == 0 && allStoreErrors(out) {
		return out[0].Err // nothing was written: errorHandler answers it as for one append
	}
	return c.JSON(http.StatusOK, res)
}

// storeProblem is the problem of an append the store failed: what the
// error handler would answer for it alone (507 or 503 for the disk, 503
// for a store not answering, else a 500 whose error is logged).
func (s *Server) storeProblem(c echo.Context, err error) *Problem {
	var de *diskspace.Error
	switch {
	case errors.As(err, &de):
		return storageProblem(de)
	case s.storeUnavailable(err) != nil:
		return s.storeUnavailable(err)
	}
	s.log.Error("batch append: an append failed", "path", c.Request().URL.Path, "error", err)
	return problem(http.StatusInternalServerError, "internal", "the server failed to append this commit; see its log")
}

// allStoreErrors reports whether every outcome failed for a reason of the
// store's, none for its request.
func allStoreErrors(out []eventlog.AppendOutcome) bool {
	for _, o := range out {
		if o.Err == nil || appendProblem(o.Err) != nil {
			return false
		}
	}
	return true
}
