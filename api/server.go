// Package api is the host's REST surface (echo): modules, events,
// subscriptions, parked aggregates and their resolved history, bulk jobs,
// the audit log, the cluster's members and forwarded operator calls,
// projections' read models, configuration reload, health, metrics, the
// OpenAPI document and the ops console. Errors are
// application/problem+json documents that name the problem.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/berthhq/berth/cluster"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/diskspace"
	"github.com/berthhq/berth/jobs"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/subscription"
	"github.com/berthhq/berth/webhook"
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
	// Operator makes the operator calls (resume, skip, pause, pause until,
	// unpause, reset); reads stay on Engine. In a cluster it is the host's
	// cluster.Forwarder, which acts wherever the call must; nil: Engine (a
	// single host).
	Operator subscription.Operator
	Ledger   ledger.Store
	Metrics  *Metrics
	Sandbox  *sandbox.Sandbox // its instance pools are reported at /metrics
	Logger   *slog.Logger
	// Ready reports whether the host has finished starting (GET /readyz).
	Ready func() bool
	// Disk is the data directory's free-space guard, reported by /healthz
	// and /readyz (health.go); nil: not reported.
	Disk *diskspace.Guard
	// Jobs runs bulk resume and skip jobs (/v1/jobs).
	Jobs *jobs.Runner
	// Hooks delivers the webhooks; its deliveries and backlog are reported
	// at /metrics (nil: not reported).
	Hooks *webhook.Dispatcher
	// Cluster is this host's place in a deployment of several hosts
	// (GET /v1/cluster): a *cluster.Cluster; nil, or a nil
	// *cluster.Cluster, on a single host.
	Cluster ClusterView
}

// Server is the REST API.
type Server struct {
	deps        Deps
	log         *slog.Logger
	e           *echo.Echo
	crossOrigin *http.CrossOriginProtection // see guardOrigin
}

// New builds the API's routes.
func New(deps Deps) *Server {
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Metrics == nil {
		deps.Metrics = NewMetrics()
	}
	if deps.Engine != nil {
		deps.Metrics.Registry.MustRegister(newEngineCollector(deps.Engine, deps.Ledger))
		if deps.Operator == nil {
			deps.Operator = deps.Engine
		}
	}
	if deps.Sandbox != nil {
		deps.Metrics.Registry.MustRegister(newSandboxCollector(deps.Sandbox))
	}
	if deps.Ready == nil {
		deps.Ready = func() bool { return true }
	}
	if c, ok := deps.Cluster.(*cluster.Cluster); ok && c == nil {
		// A host's Cluster field is a nil pointer on a single host, which
		// in the interface would not compare equal to nil.
		deps.Cluster = nil
	}
	deps.Metrics.Registry.MustRegister(newPartsCollector(deps))
	s := &Server{deps: deps, log: deps.Logger, e: echo.New(), crossOrigin: http.NewCrossOriginProtection()}
	e := s.e
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler
	e.Use(s.countRequests)
	e.Use(s.guardOrigin, allowHead) // every request, the console's and unknown routes' too

	query, err := documentedQuery(openapiDoc)
	if err != nil {
		panic(err) // the embedded document; its tests parse it
	}
	for _, r := range s.routeTable() {
		mw := []echo.MiddlewareFunc{decodePathParams}
		if r.role != "" {
			mw = append(mw, s.require(r.role))
		}
		mw = append(mw, checkQuery(r.method+" "+openapiPath(r.path), query[r.method+" "+openapiPath(r.path)]))
		if changesState(r.method) {
			mw = append(mw, s.limitBody(r), accepts(r.body), s.writeDeadline)
		}
		if r.guarded() {
			mw = append(mw, s.guardDisk)
		}
		if r.audited() {
			mw = append(mw, s.audit(r))
		}
		e.Add(r.method, r.path, r.handler, mw...)
	}
	s.consoleRoutes()
	return s
}

// route is one API endpoint: the role its bearer token needs ("" for none:
// health, readiness and the OpenAPI document), for a state-changing one
// the media types its request body may have (none: it takes no body; see
// accepts), and what it does to the data directory (see storeUse: a
// state-changing route is refused below the free-space reserve unless it
// says it stores nothing). The table both registers the routes and lets
// the OpenAPI test check the document against them.
type route struct {
	method, path string
	handler      echo.HandlerFunc
	role         config.Role
	body         []string
	store        storeUse
}

func (s *Server) routeTable() []route {
	const get, put, post, del = http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete
	reader, operator, deployer, admin := config.RoleReader, config.RoleOperator, config.RoleDeployer, config.RoleAdmin
	none, jsonBody, wasmBody := []string(nil), []string{mediaJSON}, []string{mediaWasm, mediaBinary}
	return []route{
		{get, "/healthz", s.healthz, "", none, reads},
		{get, "/readyz", s.readyz, "", none, reads},
		{get, "/metrics", echo.WrapHandler(promhttp.HandlerFor(s.deps.Metrics.Registry, promhttp.HandlerOpts{})), reader, none, reads},
		{get, "/v1/openapi.json", s.openapi, "", none, reads},
		{get, "/v1/cluster", s.getCluster, reader, none, reads},

		{put, "/v1/modules/:name", s.putModule, deployer, wasmBody, writes},
		{get, "/v1/modules", s.listModules, reader, none, reads},
		{get, "/v1/modules/:name", s.getModule, reader, none, reads},
		{del, "/v1/modules/:name", s.deleteModule, deployer, none, writes},
		{get, "/v1/modules/:name/versions", s.moduleVersions, reader, none, reads},
		{get, "/v1/modules/:name/versions/:version/wasm", s.moduleVersionWasm, reader, none, reads},
		{post, "/v1/modules/:name/rollback", s.rollbackModule, deployer, jsonBody, writes},

		{post, "/v1/events", s.appendEvents, deployer, jsonBody, appends},
		{post, "/v1/events/batch", s.appendBatch, deployer, jsonBody, appends},
		{get, "/v1/aggregates/:type/:id/events", s.aggregateEvents, reader, none, reads},

		{get, "/v1/subscriptions", s.listSubscriptions, reader, none, reads},
		{get, "/v1/subscriptions/:name", s.getSubscription, reader, none, reads},
		{post, "/v1/subscriptions/:name/pause", s.pauseSubscription, operator, jsonBody, writes}, // optional
		{post, "/v1/subscriptions/:name/unpause", s.unpauseSubscription, operator, none, writes},
		{post, "/v1/subscriptions/:name/reset", s.resetSubscription, operator, jsonBody, writes},

		{get, "/v1/parked", s.listParked, reader, none, reads},
		{get, "/v1/parked/groups", s.listGroups, reader, none, reads},
		{post, "/v1/parked/groups/:group/proofs", s.putProof, operator, jsonBody, writes},
		{get, "/v1/resolved", s.listResolved, reader, none, reads},
		{get, "/v1/audit", s.listAudit, reader, none, reads},
		{post, "/v1/jobs", s.createJob, operator, jsonBody, writes},
		{get, "/v1/jobs", s.listJobs, reader, none, reads},
		{get, "/v1/jobs/:id", s.getJob, reader, none, reads},
		{post, "/v1/jobs/:id/cancel", s.cancelJob, operator, none, writes},
		{get, "/v1/subscriptions/:name/parked/:type/:id", s.getParked, reader, none, reads},
		{get, "/v1/subscriptions/:name/parked/:type/:id/capsule", s.getCapsule, reader, none, reads},
		{post, "/v1/subscriptions/:name/parked/:type/:id/resume", s.resumeParked, operator, jsonBody, writes}, // optional
		{post, "/v1/subscriptions/:name/parked/:type/:id/skip", s.skipParked, operator, jsonBody, writes},     // optional

		{get, "/v1/projections/:subscription", s.listProjection, reader, none, reads},
		{get, "/v1/projections/:subscription/:key", s.getProjection, reader, none, reads},

		{post, "/v1/config/reload", s.reloadConfig, admin, none, storesNothing},
	}
}

// changesState reports whether a method may change what the host stores:
// every method but the safe ones, whose bodies the API never reads.
func changesState(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// Handler returns the API as an http.Handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// Echo exposes the router, for the OpenAPI test.
func (s *Server) routes() []*echo.Route { return s.e.Routes() }

func (s *Server) countRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		code := c.Response().Status
		if err != nil {
			s.errorHandler(err, c)
			code = c.Response().Status
		}
		s.deps.Metrics.countRequest(c.Request().Method, c.Path(), code)
		return nil
	}
}

func (s *Server) reloadConfig(c echo.Context) error {
	if err := s.deps.Reload(); err != nil {
		return badRequest("invalid-config", "the configuration was not reloaded; the running one stays: %v", err)
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "reloaded"})
}

// Serve runs the API on addr until ctx ends, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, srv *http.Server, shutdownTimeout time.Duration) error {
	srv.Handler = s.Handler()
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
