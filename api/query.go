package api

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// checkQuery refuses with 400 a query string that the route would not read
// as its client meant: one that is not validly encoded (a bad escape, a
// ";" separator, which net/url drops silently, with the pairs after it), a
// parameter the route does not take (documented, its openapi.json
// operation's; a misspelt filter would otherwise be ignored and every
// record listed), and a parameter given twice (the handlers read the first
// one only). The problem names the parameter.
func checkQuery(route string, allowed []string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			raw := c.Request().URL.RawQuery
			if raw == "" {
				return next(c)
			}
			q, err := url.ParseQuery(raw)
			if err != nil {
				return badRequest("invalid-query", "the query string %q is not validly encoded: %v", raw, err)
			}
			names := make([]string, 0, len(q))
			for name := range q {
				names = append(names, name)
			}
			slices.Sort(names)
			for _, name := range names {
				switch {
				case !slices.Contains(allowed, name):
					takes := "takes no query parameters"
					if len(allowed) > 0 {
						takes = "takes only " + strings.Join(allowed, ", ")
					}
					return queryProblem(name, "unknown query parameter "+strconv.Quote(name)+": "+route+" "+takes)
				case len(q[name]) > 1:
					return queryProblem(name, "query parameter "+strconv.Quote(name)+" is given "+strconv.Itoa(len(q[name]))+" times: give it once")
				}
			}
			return next(c)
		}
	}
}

func queryProblem(field, detail string) *Problem {
	return fieldProblem("invalid-query", field, detail)
}

// queryTime reads raw, the query parameter name, as an RFC 3339 time (zero
// when it is absent); anything else is a 400 naming it.
func queryTime(name, raw string) (time.Time, error) {
	if raw == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		return time.Time{}, fieldProblem("invalid-query", name, name+" must be an RFC 3339 time such as 2026-12-03T08:00:00Z, got "+strconv.Quote(raw))
	}
	return t, nil
}
