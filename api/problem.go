package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/internal/diskspace"
	"github.com/labstack/echo/v4"
)

// Problem is an RFC 9457 problem document, the body of every error answer
// (Content-Type application/problem+json). It is the API's own type
// (wire.Problem), so a handler returns the very document a client decodes.
type Problem = wire.Problem

func problem(status int, kind, detail string) *Problem {
	return &Problem{Type: wire.ProblemBase + kind, Title: http.StatusText(status), Status: status, Detail: detail}
}

func badRequest(kind, format string, args ...any) *Problem {
	return problem(http.StatusBadRequest, kind, fmt.Sprintf(format, args...))
}

func notFound(format string, args ...any) *Problem {
	return problem(http.StatusNotFound, "not-found", fmt.Sprintf(format, args...))
}

// errorHandler writes every error as application/problem+json. A store's
// transient fault (NATS not answering within the request's time) is a 503
// with Retry-After (unavailable.go); other errors that are not problems
// become 500s whose detail is logged, not shown.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var p *Problem
	var he *echo.HTTPError
	var de *diskspace.Error
	switch {
	case errors.As(err, &p):
	case errors.As(err, &de):
		p = storageProblem(de)
	case errors.As(err, &he):
		msg := fmt.Sprint(he.Message)
		kind := "http"
		switch he.Code {
		case http.StatusNotFound:
			kind, msg = "not-found", fmt.Sprintf("no route %s %s", c.Request().Method, c.Request().URL.Path)
		case http.StatusMethodNotAllowed:
			r := c.Request()
			kind, msg = "method-not-allowed", fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path)
			if allow := c.Response().Header().Get(echo.HeaderAllow); allow != "" {
				msg += "; it takes " + withHead(allow) + " (see the Allow header)"
			}
		case http.StatusRequestEntityTooLarge:
			kind, msg = "too-large", "the request body exceeds the limit"
		case http.StatusUnauthorized:
			kind = "unauthorized"
		}
		p = problem(he.Code, kind, msg)
	case s.storeUnavailable(err) != nil:
		p = s.storeUnavailable(err)
		s.log.Warn("request answered 503: a store did not answer in time", "method", c.Request().Method, "path", c.Request().URL.Path, "error", err)
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(retryAfter/time.Second)))
	default:
		s.log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "error", err)
		p = problem(http.StatusInternalServerError, "internal", "the server failed to handle the request; see its log")
	}
	body, _ := json.Marshal(p)
	c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
	c.Response().WriteHeader(p.Status)
	c.Response().Write(body)
}

// fieldProblem is a 400 problem of type kind about one field of the
// request (its JSON path, or a query parameter's name).
func fieldProblem(kind, field, detail string) *Problem {
	p := problem(http.StatusBadRequest, kind, detail)
	p.Field = field
	return p
}
