package api

import (
	"net/http"
	"strings"

	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/subscription"
	"github.com/labstack/echo/v4"
)

// actorKey is where the authenticated token's name is kept on the request,
// for the ledger's "who resumed it" records.
const actorKey = "berth.actor"

// require lets a request through when its bearer token's role allows need.
// With no token configured every request passes (the server then listens on
// loopback only) and the actor is "local".
func (s *Server) require(need config.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			cfg := s.deps.Config()
			if cfg.RequireLoopback() {
				c.Set(actorKey, "local")
				return next(c)
			}
			bearer, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
			if !ok || bearer == "" {
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="berth"`)
				return problem(http.StatusUnauthorized, "unauthorized", "this endpoint needs an Authorization: Bearer token")
			}
			tok, ok := cfg.Authenticate(bearer)
			if !ok {
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="berth", error="invalid_token"`)
				return problem(http.StatusUnauthorized, "unauthorized", "the bearer token is not known")
			}
			if !tok.Role.Allows(need) {
				return problem(http.StatusForbidden, "forbidden", "token "+tok.Name+" has role "+string(tok.Role)+"; this needs "+string(need))
			}
			c.Set(actorKey, tok.Name)
			return next(c)
		}
	}
}

func actor(c echo.Context) string {
	if a, ok := c.Get(actorKey).(string); ok {
		return a
	}
	return "unknown"
}

// caller is the request's operator call's caller: its actor, and reason.
func caller(c echo.Context, reason string) subscription.Caller {
	return subscription.Caller{Actor: actor(c), Reason: reason}
}
