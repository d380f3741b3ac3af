// Package api is the host's REST surface (echo): modules, events,
// subscriptions, parked aggregates, configuration reload, health, metrics,
// the OpenAPI document and the ops console. Errors are
// application/problem+json documents that name the problem.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/subscription"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Deps are what the API serves from.
type Deps struct {
	Config  func() *config.Config // the running configuration
	Reload  func() error          // reloads the configuration file (POST /v1/config/reload)
	Modules *registry.Registry
	Log     eventlog.Log
	Engine  *subscription.Engine
	Ledger  ledger.Store
	Metrics *Metrics
	Logger  *slog.Logger
	// Ready reports whether the host has finished starting (GET /readyz).
	Ready func() bool
}

// Server is the REST API.
type Server struct {
	deps Deps
	log  *slog.Logger
	e    *echo.Echo
}

// New builds the API's routes.
func New(deps Deps) *Server {
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Metrics == nil {
		deps.Metrics = NewMetrics()
	}
	if deps.Ready == nil {
		deps.Ready = func() bool { return true }
	}
	s := &Server{deps: deps, log: deps.Logger, e: echo.New()}
	e := s.e
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler
	e.Use(s.bodyLimit, s.countRequests)

	reader, operator, deployer, admin := s.require(config.RoleReader), s.require(config.RoleOperator), s.require(config.RoleDeployer), s.require(config.RoleAdmin)

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(deps.Metrics.Registry, promhttp.HandlerOpts{})), reader)
	e.GET("/v1/openapi.json", s.openapi)

	e.PUT("/v1/modules/:name", s.putModule, deployer)
	e.GET("/v1/modules", s.listModules, reader)
	e.GET("/v1/modules/:name", s.getModule, reader)
	e.DELETE("/v1/modules/:name", s.deleteModule, deployer)

	e.POST("/v1/events", s.appendEvents, deployer)
	e.GET("/v1/aggregates/:type/:id/events", s.aggregateEvents, reader)

	e.GET("/v1/subscriptions", s.listSubscriptions, reader)
	e.GET("/v1/subscriptions/:name", s.getSubscription, reader)
	e.POST("/v1/subscriptions/:name/pause", s.pauseSubscription, operator)
	e.POST("/v1/subscriptions/:name/unpause", s.unpauseSubscription, operator)
	e.POST("/v1/subscriptions/:name/reset", s.resetSubscription, operator)

	e.GET("/v1/parked", s.listParked, reader)
	e.GET("/v1/subscriptions/:name/parked/:type/:id", s.getParked, reader)
	e.POST("/v1/subscriptions/:name/parked/:type/:id/resume", s.resumeParked, operator)
	e.POST("/v1/subscriptions/:name/parked/:type/:id/skip", s.skipParked, operator)

	e.POST("/v1/config/reload", s.reloadConfig, admin)

	s.consoleRoutes()
	return s
}

// Handler returns the API as an http.Handler.
func (s *Server) Handler() http.Handler { return s.e }

// Echo exposes the router, for the OpenAPI test.
func (s *Server) routes() []*echo.Route { return s.e.Routes() }

// bodyLimit caps JSON bodies at server.max-body-size; module uploads have
// their own, larger cap (server.max-module-size) applied in putModule.
func (s *Server) bodyLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Method != http.MethodPut && r.Body != nil {
			r.Body = http.MaxBytesReader(c.Response(), r.Body, s.deps.Config().Server.MaxBodySize.Bytes())
		}
		return next(c)
	}
}

func (s *Server) countRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		code := c.Response().Status
		if err != nil {
			s.errorHandler(err, c)
			code = c.Response().Status
		}
		s.deps.Metrics.requests.WithLabelValues(c.Path(), strconv.Itoa(code)).Inc()
		return nil
	}
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(c echo.Context) error {
	if !s.deps.Ready() {
		return problem(http.StatusServiceUnavailable, "not-ready", "the host is still starting")
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) reloadConfig(c echo.Context) error {
	if err := s.deps.Reload(); err != nil {
		return badRequest("invalid-config", "the configuration was not reloaded; the running one stays: %v", err)
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "reloaded"})
}

// Serve runs the API on addr until ctx ends, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, srv *http.Server, shutdownTimeout time.Duration) error {
	srv.Handler = s.e
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}
