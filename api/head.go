package api

import (
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
)

// serveHTTP is the API's http.Handler: echo's, with HEAD answered as GET,
// which HTTP asks of every server (RFC 9110, 9.3.2) and echo does not do
// for routes registered for GET alone. The request routed is a copy with
// method GET; net/http, which keeps the original, still answers HEAD: the
// headers GET's answer would have (its Content-Length too), no body.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead {
		get := r.Clone(r.Context())
		get.Method = http.MethodGet
		r = get
	}
	s.e.ServeHTTP(w, r)
}

// allowHead adds HEAD to the Allow header of an answer (a 405, an OPTIONS)
// that lists GET, as serveHTTP serves it.
func allowHead(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		c.Response().Before(func() {
			if allow := h.Get(echo.HeaderAllow); allow != "" {
				h.Set(echo.HeaderAllow, withHead(allow))
			}
		})
		return next(c)
	}
}

// withHead is a list of methods (an Allow header's) with HEAD after GET,
// if GET is in it.
func withHead(allow string) string {
	methods := strings.Split(allow, ", ")
	i := slices.Index(methods, http.MethodGet)
	if i < 0 || slices.Contains(methods, http.MethodHead) {
		return allow
	}
	return strings.Join(slices.Insert(methods, i+1, http.MethodHead), ", ")
}
