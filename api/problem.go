package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/berthhq/berth/internal/diskspace"
	"github.com/labstack/echo/v4"
)

// Problem is an RFC 9457 problem document, the body of every error answer
// (Content-Type application/problem+json).
type Problem struct {
	Type   string `json:"type"`             // a URI naming the kind of problem, under https://berth.dev/problems/
	Title  string `json:"title"`            // the kind of problem, in words
	Status int    `json:"status"`           // the HTTP status
	Detail string `json:"detail,omitempty"` // what is wrong, naming the input
	// Field names the request field at fault, when there is one.
	Field string `json:"field,omitempty"`
}

// Error makes a Problem usable as an error returned from a handler.
func (p *Problem) Error() string { return fmt.Sprintf("%d %s: %s", p.Status, p.Title, p.Detail) }

func problem(status int, kind, detail string) *Problem {
	return &Problem{Type: "https://berth.dev/problems/" + kind, Title: http.StatusText(status), Status: status, Detail: detail}
}

func badRequest(kind, format string, args ...any) *Problem {
	return problem(http.StatusBadRequest, kind, fmt.Sprintf(format, args...))
}

func notFound(format string, args ...any) *Problem {
	return problem(http.StatusNotFound, "not-found", fmt.Sprintf(format, args...))
}

// errorHandler writes every error as application/problem+json. Errors that
// are not problems become 500s whose detail is logged, not shown.
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
			kind = "method-not-allowed"
		case http.StatusRequestEntityTooLarge:
			kind, msg = "too-large", "the request body exceeds the limit"
		case http.StatusUnauthorized:
			kind = "unauthorized"
		}
		p = problem(he.Code, kind, msg)
	default:
		s.log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "error", err)
		p = problem(http.StatusInternalServerError, "internal", "the server failed to handle the request; see its log")
	}
	body, _ := json.Marshal(p)
	c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
	c.Response().WriteHeader(p.Status)
	c.Response().Write(body)
}
