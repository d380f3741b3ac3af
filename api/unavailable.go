package api

import (
	"context"
	"net/http"
	"time"

	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/internal/jsapi"
	"github.com/labstack/echo/v4"
)

// A write that goes to NATS JetStream (an append, the ledger's updates
// behind resume, skip, pause and jobs, a module's upload, removal or
// rollback) meets NATS electing a stream leader now and then, for a few
// seconds after a node goes down. The stores ask again within the request's
// time (jsapi.Ask); a request whose time runs out first is answered 503
// with Retry-After — a fault the client may retry — never 500.

// retryAfter is the Retry-After of a 503 for a store that did not answer:
// about how long a JetStream leader election takes.
const retryAfter = 2 * time.Second

// requestTime is how long a state-changing request may ask its stores
// again: server.write-timeout, less a tenth (at most 5s) left to write the
// 503, as past write-timeout the client gets no answer at all. 0: no bound
// (no configuration, or no write-timeout).
func requestTime(cfg *config.Config) time.Duration {
	if cfg == nil {
		return 0
	}
	wt := cfg.Server.WriteTimeout.Std()
	if wt <= 0 {
		return 0
	}
	return wt - min(wt/10, 5*time.Second)
}

// writeDeadline gives a state-changing request's context the deadline of
// requestTime, so that the stores asking NATS again stop in time for the
// client to get the 503 rather than a dropped connection.
func (s *Server) writeDeadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.deps.Config == nil {
			return next(c)
		}
		d := requestTime(s.deps.Config())
		if d <= 0 {
			return next(c)
		}
		ctx, cancel := context.WithTimeout(c.Request().Context(), d)
		defer cancel()
		c.SetRequest(c.Request().WithContext(ctx))
		return next(c)
	}
}

// storeUnavailable is the problem of err when it is a store's transient
// fault (jsapi.Transient: NATS not answering, a leader being elected, a
// request's time running out), nil otherwise.
func (s *Server) storeUnavailable(err error) *Problem {
	if !jsapi.Transient(err) {
		return nil
	}
	if s.deps.Config != nil && s.deps.Config().Store.Backend == config.BackendJetStream {
		return problem(http.StatusServiceUnavailable, "nats-unavailable",
			"NATS JetStream, which keeps the deployment's event log, ledger and modules (store.jetstream.urls), did not answer within the request's time (server.write-timeout; a stream electing a leader, or its servers down): "+
				err.Error()+"; try again after Retry-After")
	}
	return problem(http.StatusServiceUnavailable, "unavailable",
		"the store did not answer within the request's time (server.write-timeout): "+err.Error()+"; try again after Retry-After")
}
